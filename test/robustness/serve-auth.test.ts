/**
 * `nexrl serve --api-key`: every route but the health checks needs the key, in the header of
 * any protocol's clients; a non-loopback host needs a key or `--insecure`, with a warning.
 */
import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { OpenAIInferenceClient } from "../../src/inference/index.js";
import { createTrainingService } from "../../src/backends/index.js";
import { call, server, startCli, tempDir, tinkerDatum } from "./serve-helpers.js";
import { AuthenticationError } from "../../src/errors.js";

const KEY = "nexrl-serve-test-key-4f9c2a";

/** One request of each protocol that needs authentication. */
const PROTECTED = [
  ["tinker", "POST", "/api/v1/create_session", { tags: [], sdk_version: "0.25.0", type: "create_session" }],
  ["weaver", "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" }],
  ["weaver", "GET", "/api/v1/supported-models", undefined],
  ["openai", "GET", "/v1/models", undefined],
  ["openai", "POST", "/v1/completions", { model: "tiny", prompt: "a", max_tokens: 1 }],
] as const;

/** Every header a client may carry the key in. */
const KEY_HEADERS: Array<Record<string, string>> = [
  { "X-API-Key": KEY },
  { "X-WEAVER-API-KEY": KEY },
  { Authorization: `Bearer ${KEY}` },
];

describe("nexrl serve with an API key", () => {
  it("answers 401 with a JSON error in each protocol's shape to requests without the key or with a wrong one", async () => {
    const { url } = await server({ apiKey: KEY });
    for (const [protocol, method, path, body] of PROTECTED) {
      const wrong: Array<Record<string, string>> = [
        {},
        { "X-API-Key": "wrong" },
        { Authorization: "Bearer wrong" },
        { Authorization: KEY },
      ];
      for (const headers of wrong) {
        const answer = await call(url, method, path, body, headers);
        expect(answer.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
        const text = JSON.stringify(answer.body);
        expect(text).not.toContain(KEY);
        expect(text).toContain("X-API-Key, X-WEAVER-API-KEY, Authorization: Bearer");
        if (protocol === "openai") expect(answer.body.error).toMatchObject({ code: "invalid_api_key" });
        else expect(answer.body).toMatchObject({ error: "unauthorized", retryable: false });
      }
    }
  });

  it("accepts the key in any protocol's header on every route, and keeps health checks open", async () => {
    const { url } = await server({ apiKey: KEY });
    for (const [, method, path, body] of PROTECTED)
      for (const headers of KEY_HEADERS)
        expect((await call(url, method, path, body, headers)).status, `${path} ${Object.keys(headers)[0]}`).toBe(200);
    for (const path of ["/health", "/healthz", "/api/v1/healthz"])
      expect((await call(url, "GET", path)).body).toEqual({ status: "ok" });
  });

  it("serves nexrl's own Tinker, Weaver and OpenAI clients given the key, and fails them at once without it", async () => {
    const { url } = await server({ apiKey: KEY });
    const outputDir = await tempDir();
    for (const backend of ["tinker", "weaver"] as const) {
      const service = createTrainingService(backend, { baseUrl: url, apiKey: KEY, outputDir, env: {} });
      try {
        const trainer = await service.createTrainingClient({ baseModel: "tiny" });
        const pass = await (await trainer.forwardBackward([tinkerDatum("key") as never], "cross_entropy")).result();
        expect(pass.metrics["loss:sum"]).toBeGreaterThan(0);
      } finally {
        await service.close();
      }
      const refused = createTrainingService(backend, { baseUrl: url, apiKey: "wrong-key", outputDir, env: {} });
      try {
        await expect(refused.createTrainingClient({ baseModel: "tiny" })).rejects.toBeInstanceOf(AuthenticationError);
      } finally {
        await refused.close();
      }
    }
    const inference = new OpenAIInferenceClient({
      baseURL: `${url}/v1`,
      apiKey: KEY,
      model: "tiny",
      tokenizer: new ByteTokenizer(),
    });
    expect((await inference.completion("ab", { maxTokens: 2, seed: 1 })).responseTokens.length).toBeGreaterThan(0);
  });
});

describe("nexrl serve on a non-loopback address (child process of the built CLI)", () => {
  it("refuses to serve without a key (exit 2, one line saying what to do)", async () => {
    const cli = startCli(["serve", "--host", "0.0.0.0", "--port", "0"]);
    expect((await cli.exited).code).toBe(2);
    expect(cli.stderr()).toBe(
      "nexrl: refusing to serve on 0.0.0.0 without an API key: other machines could reach it and train, sample and write files; " +
        "give an API key (--api-key KEY or NEXRL_SERVE_API_KEY), bind 127.0.0.1, or pass --insecure to serve without a key\n",
    );
    expect(cli.stdout()).toBe("");
  });

  it("serves with --insecure, warning that anyone who reaches the port can use it", async () => {
    const cli = startCli(["serve", "--host", "0.0.0.0", "--port", "0", "--insecure"]);
    await expect.poll(cli.stdout, { timeout: 20_000 }).toMatch(/on http:\/\/0\.0\.0\.0:(\d+)/);
    expect(cli.stderr()).toMatch(/^warning: nexrl serve listens on 0\.0\.0\.0 without an API key \(--insecure\)/);
    const port = /:(\d+)\n/.exec(cli.stdout())![1];
    expect((await call(`http://127.0.0.1:${port}`, "GET", "/v1/models")).status).toBe(200);
    cli.kill("SIGTERM");
    expect((await cli.exited).code).toBe(0);
  });

  it("takes the key from NEXRL_SERVE_API_KEY, warns, checks it, and never prints it", async () => {
    const cli = startCli(["serve", "--host", "0.0.0.0", "--port", "0"], { env: { NEXRL_SERVE_API_KEY: KEY } });
    await expect.poll(cli.stdout, { timeout: 20_000 }).toMatch(/on http:\/\/0\.0\.0\.0:(\d+)/);
    expect(cli.stdout()).toContain("API key required (X-API-Key, X-WEAVER-API-KEY or Authorization: Bearer)");
    expect(cli.stderr()).toMatch(/^warning: nexrl serve listens on 0\.0\.0\.0, reachable from other machines/);
    const base = `http://127.0.0.1:${/:(\d+)\n/.exec(cli.stdout())![1]}`;
    expect((await call(base, "GET", "/v1/models")).status).toBe(401);
    expect((await call(base, "GET", "/v1/models", undefined, { Authorization: `Bearer ${KEY}` })).status).toBe(200);
    cli.kill("SIGINT");
    expect((await cli.exited).code).toBe(0);
    expect(cli.stdout() + cli.stderr()).not.toContain(KEY);
  });
});
