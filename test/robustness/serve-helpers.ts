/**
 * Shared fixtures of the robustness probes of `nexrl serve`, the agent gateway and the CLI:
 * protocol sessions over real HTTP, and child processes of the built CLI.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, expect } from "vitest";
import { call, type Answer } from "../support/server.js";

export { ADAM, call, server, tinkerDatum, tokens, type Answer } from "../support/server.js";

const root = path.resolve(import.meta.dirname, "../..");
/** The built CLI (`npm test` builds it first). */
export const CLI = path.join(root, "dist/cli/main.js");

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A fresh temporary folder, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "nexrl-robustness-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A Tinker session with a `tiny` training model. */
export async function tinkerModel(url: string, headers: Record<string, string> = {}) {
  const session = await call(
    url,
    "POST",
    "/api/v1/create_session",
    { tags: [], sdk_version: "0.25.0", type: "create_session" },
    headers,
  );
  const created = await call(
    url,
    "POST",
    "/api/v1/create_model",
    { session_id: session.body.session_id, model_seq_id: 0, base_model: "tiny", type: "create_model" },
    headers,
  );
  await tinkerResult(url, created.body.request_id, headers);
  return { sessionId: session.body.session_id as string, modelId: created.body.model_id as string };
}

/** A Tinker sampling session on the base model `baseModel`. */
export async function tinkerSampler(url: string, sessionId: string, baseModel = "tiny"): Promise<string> {
  const opened = await call(url, "POST", "/api/v1/create_sampling_session", {
    session_id: sessionId,
    sampling_session_seq_id: 0,
    base_model: baseModel,
    type: "create_sampling_session",
  });
  expect(opened.status).toBe(200);
  return opened.body.sampling_session_id as string;
}

/** A Tinker `asample` body. */
export function tinkerSample(samplingSessionId: string, prompt: number[], numSamples = 1, maxTokens = 8) {
  return {
    sampling_session_id: samplingSessionId,
    seq_id: 1,
    num_samples: numSamples,
    prompt: { chunks: [{ type: "encoded_text", tokens: prompt }] },
    sampling_params: { max_tokens: maxTokens, seed: 3, temperature: 1, top_k: -1, top_p: 1 },
    prompt_logprobs: false,
    topk_prompt_logprobs: 0,
    type: "sample",
  };
}

/** Polls a Tinker future until it is not `try_again`. */
export async function tinkerResult(url: string, requestId: string, headers: Record<string, string> = {}) {
  for (;;) {
    const answer = await call(
      url,
      "POST",
      "/api/v1/retrieve_future",
      { request_id: requestId, allow_metadata_only: false },
      headers,
    );
    expect(answer.status).toBe(200);
    if (answer.body.type !== "try_again") return answer.body;
  }
}

/** A Weaver session with a `tiny` model, and a sampling session on the base model. */
export async function weaverModel(url: string): Promise<{ sid: string; mid: string; ssid: string }> {
  const session = await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" });
  const sid = session.body.id as string;
  const created = await call(url, "POST", `/api/v1/sessions/${sid}/models`, { model_seq_id: 1, base_model: "tiny" });
  const sampler = await call(url, "POST", `/api/v1/sessions/${sid}/sampling-sessions`, {
    sampling_session_seq_id: 1,
    base_model: "tiny",
  });
  return { sid, mid: created.body.id as string, ssid: sampler.body.id as string };
}

/** A Weaver `samples` body. */
export function weaverSample(prompt: number[], numSamples = 1) {
  return {
    prompt: { chunks: [{ type: "encoded_text", tokens: prompt }] },
    sampling_params: { temperature: 1, top_p: 1, top_k: -1, max_tokens: 8, seed: 3 },
    num_samples: numSamples,
    prompt_logprobs: false,
    topk_prompt_logprobs: 0,
  };
}

/** A token sequence of `n` byte-tokenizer ids (the bytes of "a", "b", …). */
export function longTokens(n: number): number[] {
  return Array.from({ length: n }, (_, i) => 97 + (i % 26));
}

/** An answer's JSON error body says 400 and not retryable, whatever the protocol's shape. */
export function expectClientError(answer: Answer, status = 400): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  if (answer.body?.error && typeof answer.body.error === "object") expect(answer.body.error.type).toBeDefined();
  else expect(answer.body).toMatchObject({ retryable: false });
}

/** A running child process of the built CLI. */
export interface CliProcess {
  /** Everything it wrote so far. */
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Resolves with its exit code (or the signal that ended it). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal. */
  kill(signal: NodeJS.Signals): void;
}

/** Starts `node dist/cli/main.js ...args`; it is killed after the test if still running. */
export function startCli(
  args: readonly string[],
  options: { cwd?: string; env?: Record<string, string | undefined>; uid?: number; gid?: number } = {},
): CliProcess {
  // A minimal environment: no key of this process leaks into the child.
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, ...options.env };
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd ?? root,
    env: Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined)),
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.uid !== undefined && { uid: options.uid, gid: options.gid ?? options.uid }),
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  });
  return { stdout: () => out, stderr: () => err, exited, kill: (signal) => child.kill(signal) };
}

/** Runs the built CLI to its end. */
export async function runCli(
  args: readonly string[],
  options: Parameters<typeof startCli>[1] = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = startCli(args, options);
  const { code } = await child.exited;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}
