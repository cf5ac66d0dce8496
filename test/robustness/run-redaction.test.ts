/** Issue 13, item 10: secrets never reach the console or a file of the run folder; keys too short to be real are left alone, with a warning. */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { Redactor } from "../../src/http/redact.js";
import { secretRedactor, shortSecretWarnings } from "../../src/recipe/redact.js";
import { runCliChild, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

const ENV_SECRET = "sk-ENV-SECRET-0123456789";
const RECIPE_SECRET = "tml-RECIPE-SECRET-987654";

/** Every text file under `dir` (weights are binary). */
async function textFiles(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || /\.(nxs|nxw)$/.test(entry.name)) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(path, await readFile(path, "utf8"));
  }
  return files;
}

describe("redaction", () => {
  it("keeps an environment secret and a secret written in the recipe out of the console and every file, from user errors, stacks, samples and warnings", async () => {
    const dir = await userProject(0);
    // The secrets are in the data (so in samples.jsonl) and in the worker's errors and stacks.
    const rows = Array.from({ length: 8 }, (_, i) =>
      JSON.stringify({ prompt: `k${i} ${i % 2 ? ENV_SECRET : RECIPE_SECRET}` }),
    );
    await writeFile(join(dir, "train.jsonl"), `${rows.join("\n")}\n`);
    await writeWorker(
      dir,
      `if (task.index === 2) throw new Error(\`refused \${process.env.TINKER_API_KEY} and \${String(task.data.prompt)}\`);
    if (task.index === 4) setTimeout(() => { throw new Error(\`late \${process.env.TINKER_API_KEY}\`); }, 1);
    return this.ok(task);`,
    );
    await writeRecipe(
      dir,
      `runtime_monitor: {exception_handling: {policy: continue}}
experiment_name: "run-${ENV_SECRET}"
`,
    );
    await writeFile(
      join(dir, "recipe.yaml"),
      (await readFile(join(dir, "recipe.yaml"), "utf8")).replace(
        "service:\n",
        `service:\n  tinker_service: {api_key: ${RECIPE_SECRET}}\n`,
      ),
    );
    const out = join(dir, "out");
    const run = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, "data.max_prompt_length=40", "rollout_worker.max_sequence_length=64"],
      { cwd: dir, env: { TINKER_API_KEY: ENV_SECRET } },
    );
    expect(run.code).toBe(EXIT_CODES.ok);
    expect(run.stdout).toContain("failed (skipped): Error: refused *** and k2 ***");
    const files = await textFiles(out);
    expect([...files.keys()].map((path) => path.slice(out.length + 1)).sort()).toEqual(
      expect.arrayContaining(["config.resolved.yaml", "failures.jsonl", "metrics.jsonl", "run.json", "samples.jsonl"]),
    );
    expect(files.get(join(out, "samples.jsonl"))).toContain("***");
    expect(files.get(join(out, "failures.jsonl"))).toContain("late ***");
    for (const [path, text] of [...files, ["stdout", run.stdout], ["stderr", run.stderr]] as const) {
      expect({ path, leaks: text.includes(ENV_SECRET) || text.includes(RECIPE_SECRET) }).toEqual({
        path,
        leaks: false,
      });
    }
  });

  it("does not redact a key shorter than 8 characters (no 'e' turns into ***), and warns that it looks wrong", async () => {
    const dir = await userProject();
    await writeWorker(
      dir,
      `if (task.index === 2) throw new Error("the engine refused the request"); return this.ok(task);`,
    );
    await writeRecipe(dir, "runtime_monitor: {exception_handling: {policy: continue}}\n");
    await writeFile(
      join(dir, "recipe.yaml"),
      (await readFile(join(dir, "recipe.yaml"), "utf8")).replace(
        "service:\n",
        'service:\n  tinker_service: {api_key: "${oc.env:TINKER_API_KEY}"}\n',
      ),
    );
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", join(dir, "out")], {
      cwd: dir,
      env: { TINKER_API_KEY: "e" },
    });
    expect(run.code).toBe(EXIT_CODES.ok);
    expect(run.stdout).toContain("Error: the engine refused the request");
    expect(run.stdout).toContain("done after step 3");
    expect(run.stdout).not.toContain("***");
    expect(run.stdout).toContain(
      "warning: service.tinker_service.api_key is shorter than 8 characters: it does not look like a real API key (check its value); it is not redacted from output",
    );
  });

  it("the redactors skip short values and cover recipe secrets; the warnings name keys and the services' variables", () => {
    expect(new Redactor(["e", undefined, ""]).text("the engine")).toBe("the engine");
    expect(new Redactor(["sk-long-enough"]).text("key sk-long-enough!")).toBe("key ***!");
    const config = { service: { weaver_service: { api_key: "wv-0123456789" }, other: { token: "x" } } };
    const redact = secretRedactor(config, { MY_TOKEN: "tok-0123456789", HOME: "/root-and-more" });
    expect(redact("wv-0123456789 tok-0123456789 /root-and-more x")).toBe("*** *** /root-and-more x");
    expect(shortSecretWarnings(config, { WEAVER_API_KEY: "abc" }, ["WEAVER_API_KEY", "TINKER_API_KEY"])).toEqual([
      expect.stringMatching(/^service\.other\.token is shorter than 8 characters/),
      expect.stringMatching(/^the environment variable WEAVER_API_KEY is shorter than 8 characters/),
    ]);
  });
});
