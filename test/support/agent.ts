/** Shared fixtures of the agent tests: temporary folders, memorising models, recording clients, tasks and recipes. */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import { AgentGateway } from "../../src/agent/index.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import type { RolloutTask } from "../../src/contracts/task.js";
import { loadRecipe, type LoadedRecipe } from "../../src/recipe/index.js";
import {
  SamplerInferenceClient,
  type InferenceClient,
  type InferenceOptions,
  type InferenceResult,
} from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { ChatMessage } from "../../src/wire/tokenizer.js";
import { adamParams, datum } from "../../src/wire/wire.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Runs `cleanup` after the current test. */
export function onCleanup(cleanup: () => Promise<unknown>): void {
  cleanups.push(cleanup);
}

/** A fresh temporary folder, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-agent-"));
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Absolute path of a file in `test/agent/fixtures/`. */
export const fixture = (name: string): string => fileURLToPath(new URL(`../agent/fixtures/${name}`, import.meta.url));

/** The byte tokenizer of the local engine. */
export const tokenizer = new ByteTokenizer();

/** A tool call the memorising model writes. */
export const TOOL_CALL_TEXT = '<tool_call>{"name":"f","arguments":{"k":"a"}}</tool_call>';

/** The conversation the memorising model learns: a question, a tool call, its result, the answer. */
export const TOOL_CONVERSATION: ChatMessage[] = [
  { role: "user", content: "find a" },
  { role: "assistant", content: TOOL_CALL_TEXT },
  { role: "tool", content: "7" },
  { role: "assistant", content: "7" },
];

/**
 * A tiny model trained until it has memorised `conversations` (rendered with the byte chat
 * template), so that greedy sampling replays them; returns an inference client over its weights.
 */
export async function memorisingInference(
  conversations: readonly ChatMessage[][] = [TOOL_CONVERSATION],
  steps = 150,
): Promise<SamplerInferenceClient> {
  const service = new LocalTrainingService({ outputDir: await tempDir(), seed: 5 });
  const trainer = await service.createTrainingClient({ baseModel: "tiny" });
  const data = conversations.map((messages) => {
    const tokens = tokenizer.applyChatTemplate(messages);
    return datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: tokens.slice(1).map(() => 1) });
  });
  for (let i = 0; i < steps; i++) {
    await trainer.forwardBackward(data, "cross_entropy");
    await trainer.optimStep(adamParams({ learningRate: 3e-2 }));
  }
  const path = (await (await trainer.saveWeightsForSampler("memorised")).result()).path;
  return new SamplerInferenceClient({
    tokenizer,
    samplingClient: await service.createSamplingClient(path),
    policyVersion: 3,
  });
}

/** An inference client over the untrained tiny model. */
export async function tinyInference(seed = 1): Promise<SamplerInferenceClient> {
  const service = new LocalTrainingService({ outputDir: await tempDir(), seed });
  return new SamplerInferenceClient({
    tokenizer,
    samplingClient: await service.createSamplingClient("tiny"),
    policyVersion: 0,
  });
}

/** One completion the recording client saw: what was asked and what the sampler returned. */
export interface RecordedCompletion {
  /** The prompt sent. */
  prompt: string | number[];
  /** The options sent. */
  options: InferenceOptions;
  /** The result returned. */
  result: InferenceResult;
}

/** Wraps an inference client so that tests see exactly what each call returned. */
export function recording(inner: InferenceClient): { client: InferenceClient; calls: RecordedCompletion[] } {
  const calls: RecordedCompletion[] = [];
  const client: InferenceClient = {
    tokenizer: inner.tokenizer,
    async completion(prompt, options = {}) {
      const result = await inner.completion(prompt, options);
      calls.push({ prompt, options, result });
      return result;
    },
    chat: (messages, options) => inner.chat(messages, options),
  };
  return { client, calls };
}

/** A gateway on a free loopback port, closed after the test. */
export async function gateway(): Promise<AgentGateway> {
  const g = await AgentGateway.start({ modelName: "tiny", log: () => undefined });
  onCleanup(() => g.close());
  return g;
}

/** A rollout task over `data`. */
export function task(data: Record<string, unknown>, overrides: Partial<RolloutTask> = {}): RolloutTask {
  return {
    data,
    prompt: data.prompt as RolloutTask["prompt"],
    index: 0,
    epoch: 0,
    batchIndex: 0,
    groupId: "g0",
    runId: 0,
    groupSize: 1,
    isVal: false,
    seed: 7,
    ...overrides,
  };
}

/** Writes `files` (path → text) under `dir`. */
export async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
}

/** Writes `recipe.yaml` (YAML text) into `dir` and loads it with no environment. */
export async function writeRecipe(dir: string, yaml: string, overrides: string[] = []): Promise<LoadedRecipe> {
  const path = join(dir, "recipe.yaml");
  await writeFile(path, yaml);
  return loadRecipe(path, { env: {}, cwd: dir, overrides });
}
