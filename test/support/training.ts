import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { startServer, type CapturedRequest, type RunningServer, type ServerOptions } from "../../src/server/index.js";
import { createTrainingService, type TrainingServiceOptions } from "../../src/backends/index.js";
import type { TrainingBackend, TrainingService } from "../../src/contracts/training.js";
import { datum, type Datum } from "../../src/wire/wire.js";

/** The API key every test client sends (and every test scans output for). */
export const API_KEY = "tml-test-key-6f1c2d9e8a7b";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Registers `fn` to run after the current test. */
export function onCleanup(fn: () => Promise<unknown>): void {
  cleanups.push(fn);
}

/** A fresh temporary folder, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-training-"));
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A `nexrl serve` on 127.0.0.1 with a 1 s long poll, closed after the test; `requests` records what it parsed. */
export async function serve(
  options: Partial<ServerOptions> = {},
): Promise<RunningServer & { requests: CapturedRequest[]; logs: string[] }> {
  const requests: CapturedRequest[] = [];
  const logs: string[] = [];
  const server = await startServer({
    outputDir: await tempDir(),
    longPollTimeoutMs: 1000,
    onRequest: (r) => requests.push(r),
    log: (l) => logs.push(l),
    ...options,
  });
  onCleanup(() => server.close());
  return { ...server, requests, logs };
}

/** Client options that keep tests fast: short backoff and polling, many retries. */
export const FAST: TrainingServiceOptions = {
  backoff: { initialDelayMs: 1, maxDelayMs: 8 },
  poll: { intervalMs: 1, maxIntervalMs: 8, transientRetries: 100 },
  maxRetries: 100,
  pollTimeoutMs: 10_000,
};

/** A training service of `backend`, served by `nexrl serve` over HTTP for tinker and weaver; closed after the test. */
export async function service(
  backend: TrainingBackend,
  options: Partial<ServerOptions> = {},
  client: TrainingServiceOptions = {},
): Promise<TrainingService> {
  let svc: TrainingService;
  if (backend === "local") {
    svc = createTrainingService("local", { outputDir: await tempDir(), seed: 0 });
  } else {
    const server = await serve({ protocol: backend, ...options });
    svc = createTrainingService(backend, { baseUrl: server.url, apiKey: API_KEY, ...FAST, ...client });
  }
  onCleanup(() => svc.close());
  return svc;
}

const tokenizer = new ByteTokenizer();

/** Tokens of `text` with BOS and EOS. */
export function tokens(text: string): number[] {
  return [...tokenizer.encode(text, { addBos: true }), tokenizer.eosId];
}

/** A supervised datum over all of `text`. */
export function sftDatum(text: string): Datum {
  const t = tokens(text);
  return datum(t.slice(0, -1), { target_tokens: t.slice(1), weights: t.slice(1).map(() => 1) });
}
