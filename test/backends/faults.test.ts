/**
 * Fault injection: with `nexrl serve --faults`, every retryable fault is survived without losing
 * or repeating an optimizer step, every non-retryable one surfaces as its typed error, and the
 * API key never appears in any log line or error.
 */
import { describe, expect, it, vi } from "vitest";
import {
  createTrainingService,
  type TrainingBackend,
  type TrainingClient,
  type TrainingService,
} from "../../src/backends/index.js";
import { adamParams, datum, modelInputFromTokens } from "../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum, tokens } from "../support/training.js";
import {
  APIConnectionError,
  APIError,
  AuthenticationError,
  NexrlError,
  NotFoundError,
  RemoteOperationError,
} from "../../src/errors.js";

const SFT = [sftDatum("igpay atinlay"), sftDatum("ellohay orldway")];
const ADAM = adamParams({ learningRate: 1e-2 });
const RETRYABLE = "408:0.1,410:0.1,429:0.1,500:0.1,drop:0.1";

function client(
  backend: Exclude<TrainingBackend, "local">,
  url: string,
  logs: string[],
  extra: object = {},
): TrainingService {
  const svc = createTrainingService(backend, {
    baseUrl: url,
    apiKey: API_KEY,
    ...FAST,
    log: (l) => logs.push(l),
    ...extra,
  });
  onCleanup(() => svc.close());
  return svc;
}

/** Four pipelined SFT steps, a sampler snapshot, scoring and sampling: everything that could be lost or repeated. */
async function run(svc: TrainingService) {
  const model = await svc.createTrainingClient({ baseModel: "tiny", seed: 11 });
  const futures = [];
  for (let i = 0; i < 4; i++)
    futures.push(await model.forwardBackward(SFT, "cross_entropy"), await model.optimStep(ADAM));
  const results = await Promise.all(futures.map((f) => f.result()));
  const { path } = await (await model.saveWeightsForSampler("final")).result();
  const sampler = await svc.createSamplingClient(path);
  const text = tokens("igpay");
  return {
    losses: results.filter((_, i) => i % 2 === 0).map((r) => r.metrics["loss:sum"]),
    steps: results.at(-1)!.metrics["step:max"],
    forward: (await (await model.forward(SFT, "cross_entropy")).result()).lossFnOutputs,
    scored: await sampler.computeLogprobs(text),
    sampled: (await (await sampler.sample(modelInputFromTokens(text), 2, { maxTokens: 4, seed: 1 })).result())
      .sequences,
  };
}

/** How many training submissions the server received more than once (same path and seq_id). */
function resubmissions(requests: Array<{ path: string; body: unknown }>): number {
  const seen = new Map<string, number>();
  for (const { path, body } of requests) {
    const b = body as { seq_id?: number; payload?: { seq_id?: number } };
    const seq = b.seq_id ?? b.payload?.seq_id;
    if (seq !== undefined && !path.includes("sample"))
      seen.set(`${path}#${seq}`, (seen.get(`${path}#${seq}`) ?? 0) + 1);
  }
  return [...seen.values()].filter((n) => n > 1).length;
}

function secretsIn(...texts: string[]): string[] {
  return texts.filter((t) => t.includes(API_KEY));
}

describe.each<Exclude<TrainingBackend, "local">>(["tinker", "weaver"])("faults on %s", (backend) => {
  it("survives every retryable fault without losing or repeating a step", async () => {
    const cleanLogs: string[] = [];
    const clean = await serve({ protocol: backend });
    const expected = await run(client(backend, clean.url, cleanLogs));
    expect(expected.steps).toBe(4);
    let resubmitted = 0;
    const logs: string[] = [];
    for (const seed of [1, 2, 3]) {
      const server = await serve({ protocol: backend, faults: RETRYABLE, seed });
      const logged = logs.length;
      expect(await run(client(backend, server.url, logs))).toEqual(expected);
      // Faults happened: the client logged its retries of them. (Counting requests against the
      // clean run's cannot tell: how often a future is polled depends on how fast the engine answers.)
      expect(logs.length).toBeGreaterThan(logged);
      resubmitted += resubmissions(server.requests);
      expect(server.logs).toEqual([]);
    }
    // Tinker resubmits (after 410s, drops and error statuses) and the server deduplicates by
    // seq_id; Weaver never sends a submission twice.
    if (backend === "tinker") expect(resubmitted).toBeGreaterThan(0);
    else expect(resubmitted).toBe(0);
    expect(secretsIn(...logs)).toEqual([]); // the retries were logged without the key
  });

  it("reports a failed operation as its typed error", async () => {
    const server = await serve({ protocol: backend, faults: { error: 1 } });
    const svc = client(backend, server.url, []);
    if (backend === "tinker") {
      const error = await svc.createTrainingClient({ baseModel: "tiny" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RemoteOperationError);
      expect(error).toMatchObject({ category: "server" });
      expect((error as Error).message).toMatch(
        /create_model .*failed on the Tinker service \(server error\): fault injected/,
      );
    } else {
      const model = await svc.createTrainingClient({ baseModel: "tiny" });
      const error = await (await model.forwardBackward(SFT, "cross_entropy")).result().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RemoteOperationError);
      expect((error as Error).message).toMatch(
        /forward_backward \(seq_id 1\) failed on the Weaver service \(internal_error\): fault injected/,
      );
    }
  });

  it("reports bad inputs found by the service as user errors, and keeps serving the model", async () => {
    const server = await serve({ protocol: backend });
    const model = await client(backend, server.url, []).createTrainingClient({ baseModel: "tiny" });
    const outOfVocab = datum([1, 2, 999], { target_tokens: [2, 3, 4], weights: [1, 1, 1] });
    const error = await (await model.forward([outOfVocab], "cross_entropy")).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteOperationError);
    expect((error as Error).message).toMatch(/999, outside the model's vocabulary/);
    expect((error as RemoteOperationError).category).toBe("user");
    expect((error as RemoteOperationError).service).toBe(backend);
    expect((await (await model.forward(SFT, "cross_entropy")).result()).lossFnOutputs).toHaveLength(2);
  });

  it("refuses a wrong API key at once, naming the variable, never the key", async () => {
    const server = await serve({ protocol: backend, apiKey: "tml-the-server-only-key-123" });
    const logs: string[] = [];
    const error = await client(backend, server.url, logs)
      .createTrainingClient({ baseModel: "tiny" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ status: 401, isRetryable: false });
    expect((error as Error).message).toContain(backend === "tinker" ? "TINKER_API_KEY" : "WEAVER_API_KEY");
    expect(server.requests).toHaveLength(0);
    expect(secretsIn((error as Error).message, (error as Error).stack ?? "", JSON.stringify(error), ...logs)).toEqual(
      [],
    );
  });

  it("reports an unknown sampler path as not found", async () => {
    const server = await serve({ protocol: backend });
    const error = await client(backend, server.url, [])
      .createSamplingClient(`${backend}://nobody/sampler_weights/x`)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).toMatch(/no checkpoint or sampler snapshot at/);
  });

  it("fails fast after a submission is lost for good, instead of waiting on a hole in the sequence", async () => {
    const server = await serve({ protocol: backend });
    const svc = client(backend, server.url, [], { maxRetries: 1 });
    const model = await svc.createTrainingClient({ baseModel: "tiny" });
    await server.close();
    expect(await model.forwardBackward(SFT, "cross_entropy").catch((e: unknown) => e)).toBeInstanceOf(
      APIConnectionError,
    );
    const next = await model.optimStep(ADAM).catch((e: unknown) => e);
    expect(next).toBeInstanceOf(NexrlError);
    expect((next as Error).message).toMatch(/earlier forward_backward \(seq_id 1\) could not be submitted/);
  });
});

describe("expired promises on tinker", () => {
  it("resubmits after each 410 and gives up after maxRetries in a row", async () => {
    const server = await serve({ protocol: "tinker", faults: { 410: 1 } });
    const error = await client("tinker", server.url, [], { maxRetries: 2 })
      .createTrainingClient({ baseModel: "tiny" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIError);
    expect(error).toMatchObject({ status: 410 });
    const submits = server.requests
      .filter((r) => r.path === "/api/v1/create_model")
      .map((r) => (r.body as { model_seq_id: number }).model_seq_id);
    expect(submits).toEqual([0, 0, 0]);
  });
});

describe("secrets", () => {
  it("never print the API key: not in stdout, stderr, client or server logs, error messages, stacks or error fields", async () => {
    const printed: string[] = [];
    const spies = [vi.spyOn(process.stdout, "write"), vi.spyOn(process.stderr, "write")];
    for (const spy of spies)
      spy.mockImplementation(((chunk: string | Uint8Array) => printed.push(String(chunk)) > 0) as never);
    const logs: string[] = [];
    const errors: unknown[] = [];
    try {
      for (const backend of ["tinker", "weaver"] as const) {
        const faulty = await serve({
          protocol: backend,
          faults: "408:0.1,410:0.1,429:0.1,500:0.1,drop:0.1",
          seed: 9,
          log: (l) => logs.push(l),
        });
        await run(client(backend, faulty.url, logs));
        const failing = await serve({ protocol: backend, faults: { error: 1 }, log: (l) => logs.push(l) });
        const svc = client(backend, failing.url, logs);
        errors.push(await svc.createSamplingClient(`${backend}://x/sampler_weights/y`).catch((e: unknown) => e));
        const model = await svc.createTrainingClient({ baseModel: "tiny" }).catch((e: unknown) => e);
        if (model instanceof Error) errors.push(model);
        else
          errors.push(
            await (
              await (model as TrainingClient).forwardBackward(SFT, "cross_entropy")
            )
              .result()
              .catch((e: unknown) => e),
          );
        const locked = await serve({ protocol: backend, apiKey: "tml-another-key-999", log: (l) => logs.push(l) });
        errors.push(
          await client(backend, locked.url, logs)
            .createTrainingClient({ baseModel: "tiny" })
            .catch((e: unknown) => e),
        );
      }
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    expect(errors.every((e) => e instanceof Error)).toBe(true);
    expect(logs.length).toBeGreaterThan(0);
    const everything = [
      ...printed,
      ...logs,
      ...errors.flatMap((e) => [(e as Error).message, (e as Error).stack ?? "", JSON.stringify(e)]),
    ];
    expect(secretsIn(...everything)).toEqual([]);
    expect(
      errors
        .map((e) => (e as { requestHeaders?: Record<string, string> }).requestHeaders)
        .filter(Boolean)
        .every((h) => !JSON.stringify(h).includes(API_KEY)),
    ).toBe(true);
  });
});
