import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type ServerOptions } from "../../src/server/index.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(options: Partial<ServerOptions> = {}): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "nexrl-smoke-"));
  const server = await startServer({ outputDir: dir, longPollTimeoutMs: 200, log: () => undefined, ...options });
  cleanups.push(
    () => rm(dir, { recursive: true, force: true }),
    () => server.close(),
  );
  return server.url;
}

/** Runs `npm run smoke -- <args>`'s script in a child process, with only `env` of the service variables. */
function smoke(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(TINKER|WEAVER|NEXRL)_/.test(k)),
  ) as Record<string, string>;
  const child = spawn(process.execPath, ["--import", "tsx", path.resolve("scripts/smoke.ts"), ...args], {
    env: { ...base, ...env },
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out })));
}

describe("npm run smoke", () => {
  it("says it is skipped, and exits 0, when no key is set", async () => {
    const tinker = await smoke(["tinker"], {});
    expect(tinker.code).toBe(0);
    expect(tinker.out).toMatch(/^skipped: TINKER_API_KEY is not set/m);
    const weaver = await smoke(["weaver"], {});
    expect([weaver.code, weaver.out]).toEqual([0, expect.stringMatching(/^skipped: WEAVER_API_KEY is not set/m)]);
    expect((await smoke(["cloud"], {})).code).toBe(2);
  });

  it("trains, saves and samples against a Tinker service, printing what was negotiated", async () => {
    const url = await serve({ protocol: "tinker", tinkerClientConfig: { pjwt_auth_enabled: true } });
    const { code, out } = await smoke(["tinker"], {
      TINKER_BASE_URL: url,
      TINKER_API_KEY: "tml-smoke-dummy-key",
      NEXRL_TINKER_WIRE: "protobuf",
    });
    expect(out).toContain("wire protobuf: announced sdk_version 0.25.0");
    expect(out).toContain("forward_backward as protobuf; forward as forward_only");
    expect(out).toContain("JWT: yes");
    expect(out).toMatch(/client\/config flags: \{"pjwt_auth_enabled":true/);
    for (const stepDone of ["one SFT step", "save a checkpoint", "save sampler weights", "sample once"])
      expect(out).toMatch(new RegExp(`^ok   ${stepDone}`, "m"));
    expect(out).toMatch(/^PASS: tinker trained, saved and sampled/m);
    expect(out).not.toContain("tml-smoke-dummy-key");
    expect(code).toBe(0);
  });

  it("exits 1 with the service's own words when a step fails, the key kept out", async () => {
    const url = await serve({ protocol: "tinker", apiKey: "tml-the-right-key" });
    const { code, out } = await smoke(["tinker"], { TINKER_BASE_URL: url, TINKER_API_KEY: "tml-a-wrong-key" });
    expect(code).toBe(1);
    expect(out).toMatch(
      /^FAIL: client\/config and session: .*HTTP 401: missing or wrong API key: this server was started with an API key/m,
    );
    expect(out).not.toContain("tml-a-wrong-key");
  });

  it("trains, saves and samples against a Weaver service", async () => {
    const url = await serve({ protocol: "weaver" });
    const { code, out } = await smoke(["weaver"], { WEAVER_BASE_URL: url, WEAVER_API_KEY: "sk-smoke-dummy" });
    expect(out).toMatch(/^PASS: weaver trained, saved and sampled/m);
    expect(code).toBe(0);
  });
});
