/**
 * Row 2 of the pipeline suite: rollouts through the pipeline as a training run drives them — a
 * {@link DataLoader} batch, the {@link RolloutScheduler}, the {@link RolloutRunner} (a trivial
 * worker calling {@link OpenAIInferenceClient}) and the {@link TrajectoryPool} handing the batch
 * out — against a bare undici request loop, both at the same concurrency against the same
 * loopback server (`openai-server.ts`, in a child process).
 */
import { fork, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { Pool } from "undici";
import { ByteTokenizer } from "../../dist/engine/index.js";
import { DataLoader } from "../../dist/data/data-loader.js";
import { TrajectoryPool } from "../../dist/rollouts/pool.js";
import { RolloutRunner } from "../../dist/rollouts/runner.js";
import { RolloutScheduler } from "../../dist/rollouts/scheduler.js";
import { workerSettings } from "../../dist/recipe/settings.js";
import { BaseRolloutWorker } from "../../dist/contracts/rollout-worker.js";
import { completionTrajectory } from "../../dist/workers/completion-trajectory.js";
import type { RecipeConfig } from "../../dist/recipe/index.js";
import { OpenAIInferenceClient } from "../../dist/inference/openai/index.js";
import type { Trajectory } from "../../dist/contracts/trajectory.js";
import { PROMPT_TOKENS } from "./completion.js";

/** Tasks per group, as with `data.rollout_repeat_n`. */
const GROUP_SIZE = 8;
/** Longest a measurement round may take before the suite gives up. */
const ROUND_TIMEOUT_MS = 120_000;
/** Per-request timeout of both clients. */
const REQUEST_TIMEOUT_MS = 30_000;
const MAX_TOKENS = 16;

/** The loopback server process and its address. */
export interface LoopbackServer {
  baseUrl: string;
  close(): Promise<void>;
}

/** Forks `openai-server.ts` answering after `delayMs`. */
export async function startLoopbackServer(delayMs: number): Promise<LoopbackServer> {
  const script = fileURLToPath(new URL("./openai-server.ts", import.meta.url));
  // fork() reuses this process's execArgv, which carries tsx's loader flags.
  const child: ChildProcess = fork(script, [String(delayMs)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const [message] = (await Promise.race([
    once(child, "message"),
    once(child, "exit").then(() => Promise.reject(new Error("the loopback server exited before listening"))),
  ])) as [{ port: number }];
  return {
    baseUrl: `http://127.0.0.1:${message.port}`,
    close: async () => {
      const exited = once(child, "exit");
      child.disconnect();
      await exited;
    },
  };
}

/** The trivial worker: one completion of fixed prompt ids, reward 1. */
class EchoWorker extends BaseRolloutWorker {
  async rollout(): Promise<Trajectory> {
    return completionTrajectory(await this.inferenceClient.completion([...PROMPT_TOKENS]), 1);
  }
}

async function bounded<T>(what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ROUND_TIMEOUT_MS} ms`)), ROUND_TIMEOUT_MS);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `requests` calls of `call`, `concurrency` at a time, bounded in time; returns `requests`. */
async function loops(
  what: string,
  concurrency: number,
  requests: number,
  call: () => Promise<unknown>,
): Promise<number> {
  let left = requests;
  const loop = async (): Promise<void> => {
    while (left > 0) {
      left--;
      await call();
    }
  };
  await bounded(
    `${requests} ${what} at concurrency ${concurrency}`,
    Promise.all(Array.from({ length: concurrency }, loop)),
  );
  return requests;
}

/** One data row per group of a batch of `requests` rollouts (a multiple of the group size). */
export function groupRows(requests: number): { prompt: string }[] {
  return Array.from({ length: requests / GROUP_SIZE }, (_, i) => ({ prompt: `row ${i}` }));
}

/**
 * One batch of rollouts, a group of each of `rows`, the way a training run takes it: a
 * {@link DataLoader} batch through the {@link RolloutScheduler} and `runner` into the
 * {@link TrajectoryPool}; returns the number of rollouts.
 */
export async function scheduledBatch(
  runner: RolloutRunner,
  rows: readonly { prompt: string }[],
  what: string,
): Promise<number> {
  const requests = rows.length * GROUP_SIZE;
  const loader = new DataLoader(rows, {
    promptKey: "prompt",
    batchSize: rows.length,
    seed: 0,
    rolloutRepeatN: GROUP_SIZE,
    maxEpochs: 1,
  });
  const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: requests, stalenessThreshold: 0 });
  const scheduler = new RolloutScheduler({ loader, runner, pool, mode: "batches", lookahead: 0, batchSize: requests });
  const batch = await bounded(what, scheduler.next(0));
  if (batch?.trajectories.length !== requests)
    throw new Error(`expected ${requests} trajectories, the scheduler handed out ${batch?.trajectories.length ?? 0}`);
  return requests;
}

/** Both contenders at one concurrency; each call runs `requests` rollouts (or requests) and returns that count. */
export interface RolloutBench {
  pipeline(): Promise<number>;
  bare(): Promise<number>;
  close(): Promise<void>;
}

/** Sets up {@link RolloutBench} against `baseUrl` at `concurrency`, `requests` per call (a multiple of the group size). */
export function rolloutBench(
  baseUrl: string,
  recipe: RecipeConfig,
  concurrency: number,
  requests: number,
): RolloutBench {
  const tokenizer = new ByteTokenizer();
  // The run's stop signal, which a pipeline's runner always has (never aborted here).
  const stop = new AbortController();
  const inference = new OpenAIInferenceClient({
    baseURL: `${baseUrl}/v1`,
    apiKey: "bench",
    model: "bench",
    tokenizer,
    timeoutMs: REQUEST_TIMEOUT_MS,
    maxRetries: 0,
    // As many connections as the bare loop's pool: one per rollout in flight.
    connections: concurrency,
  });
  const runner = new RolloutRunner({
    createWorker: (slot) =>
      new EchoWorker({ name: `rollout_worker-${slot}`, settings: workerSettings(recipe), tokenizer }),
    numWorkers: concurrency,
    // A run's rollouts have a timeout (rollout_worker.rollout_timeout_seconds, 3600 by default).
    timeoutMs: recipe.rollout_worker.rollout_timeout_seconds * 1000,
    policy: { mode: "fail_fast" },
    inference,
    sampling: { temperature: 1, maxTokens: MAX_TOKENS },
    currentVersion: () => 0,
    signal: stop.signal,
  });
  const rows = groupRows(requests);
  const pipeline = () => scheduledBatch(runner, rows, `${requests} rollouts at concurrency ${concurrency}`);

  // The same body the inference client sends (sampling fields, token-id options, prompt ids).
  const body = JSON.stringify({
    max_tokens: MAX_TOKENS,
    n: 1,
    temperature: 1,
    seed: 1,
    return_token_ids: true,
    return_tokens_as_token_ids: true,
    include_stop_str_in_output: true,
    model: "bench",
    prompt: PROMPT_TOKENS,
    logprobs: 1,
  });
  const http = new Pool(baseUrl, {
    connections: concurrency,
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
  });
  const headers = { "content-type": "application/json", authorization: "Bearer bench" };
  const bare = (): Promise<number> =>
    loops("bare requests", concurrency, requests, async () => {
      const response = await http.request({ path: "/v1/completions", method: "POST", headers, body });
      if (response.statusCode !== 200) throw new Error(`the loopback server answered ${response.statusCode}`);
      await response.body.json();
    });
  return {
    pipeline,
    bare,
    close: async () => {
      await inference.close();
      await http.close();
    },
  };
}

/**
 * The layers under the pipeline's rollouts, each alone in the same request loop as the bare
 * baseline, to show where the time between the two goes: WHATWG `fetch` (which the `openai`
 * package uses), the `openai` package's `completions.create`, and `OpenAIInferenceClient.completion`.
 */
export function inferenceLayers(
  baseUrl: string,
  concurrency: number,
  requests: number,
): { contenders: Record<"fetch" | "openai_sdk" | "inference_client", () => Promise<number>>; close(): Promise<void> } {
  const body = JSON.stringify({ model: "bench", prompt: PROMPT_TOKENS, max_tokens: MAX_TOKENS, logprobs: 1 });
  const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "bench", timeout: REQUEST_TIMEOUT_MS, maxRetries: 0 });
  const client = new OpenAIInferenceClient({
    baseURL: `${baseUrl}/v1`,
    apiKey: "bench",
    model: "bench",
    tokenizer: new ByteTokenizer(),
    timeoutMs: REQUEST_TIMEOUT_MS,
    maxRetries: 0,
  });
  const contenders = {
    fetch: () =>
      loops("fetch requests", concurrency, requests, async () => {
        const response = await fetch(`${baseUrl}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        await response.json();
      }),
    openai_sdk: () =>
      loops("openai requests", concurrency, requests, () =>
        openai.completions.create({ model: "bench", prompt: [...PROMPT_TOKENS], max_tokens: MAX_TOKENS, logprobs: 1 }),
      ),
    inference_client: () =>
      loops("inference client calls", concurrency, requests, () =>
        client.completion([...PROMPT_TOKENS], { maxTokens: MAX_TOKENS }),
      ),
  };
  return { contenders, close: () => client.close() };
}
