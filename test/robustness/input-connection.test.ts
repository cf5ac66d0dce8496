/**
 * A wrong base URL fails fast with a clear error: connection refused on a loopback address, or a
 * host name that does not resolve, is retried three times on first contact instead of for ~50 s
 * (child processes of the built CLI, training over the Tinker protocol).
 */
import { lookup } from "node:dns/promises";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCli, tempDir } from "./serve-helpers.js";

const root = path.resolve(import.meta.dirname, "../..");
const UNRESOLVABLE = "no-such-host.invalid";

/** A recipe training Pig Latin over the Tinker protocol at `baseUrl`. */
async function tinkerRecipe(baseUrl: string): Promise<string> {
  const dir = await tempDir();
  await writeFile(path.join(dir, "train.jsonl"), '{"input":"hello apple","output":"ello-hay apple-way"}\n');
  await writeFile(
    path.join(dir, "recipe.yaml"),
    `defaults: [${path.join(root, "recipe/pig_latin/local.yaml")}, _self_]
data:
  data_files: [train.jsonl]
trainer:
  total_train_steps: 1
validate:
  data:
    data_files: [train.jsonl]
  eval:
    validate_freq: 0
service:
  tinker_service:
    base_url: ${baseUrl}
    api_key: tml-local
  train_service:
    backend: tinker
`,
  );
  return dir;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The retries the transport logged (as warnings with the run's progress), as `k/budget`. */
const retries = (stderr: string) => [...stderr.matchAll(/retry (\d+\/\d+) in/g)].map((m) => m[1]);

describe("a wrong base URL fails fast", () => {
  it("connection refused on a loopback port: three quick retries, then exit 3 naming the address", async () => {
    const port = await closedPort();
    const { code, stdout, stderr } = await runCli(
      ["-m", "training-service", "-c", "recipe.yaml", "--run-nexrl", "-o", "out"],
      { cwd: await tinkerRecipe(`http://127.0.0.1:${port}`) },
    );
    expect(code).toBe(EXIT_CODES.runFailed);
    expect(retries(stdout + stderr)).toEqual(["1/3", "2/3", "3/3"]);
    expect(stderr).toContain(
      `nexrl: POST http://127.0.0.1:${port}/api/v1/client/config: could not connect (connection refused: nothing listens on 127.0.0.1:${port}); check the base URL and that the service is running\n`,
    );
  });

  it("a host name that does not resolve: three quick retries, then exit 3 naming the host", async (ctx) => {
    const code = await lookup(UNRESOLVABLE).then(
      () => "resolved",
      (error: NodeJS.ErrnoException) => error.code,
    );
    if (code !== "ENOTFOUND") {
      console.warn(`skipped: this machine's resolver answers ${code} for ${UNRESOLVABLE}, not ENOTFOUND`);
      ctx.skip();
      return;
    }
    const run = await runCli(["-m", "training-service", "-c", "recipe.yaml", "--run-nexrl", "-o", "out"], {
      cwd: await tinkerRecipe(`http://${UNRESOLVABLE}:8000`),
    });
    expect(run.code).toBe(EXIT_CODES.runFailed);
    expect(retries(run.stdout + run.stderr)).toEqual(["1/3", "2/3", "3/3"]);
    expect(run.stderr).toContain(`could not connect (the host name ${UNRESOLVABLE} does not resolve)`);
  });
});
