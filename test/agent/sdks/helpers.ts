/**
 * Shared parts of the agent SDK tests: one episode of an example agent against a real gateway,
 * a scripted policy that writes given replies (a tool call, then an answer), and short training
 * runs of the example recipes on the local backend.
 */
import { readFile } from "node:fs/promises";
import { expect } from "vitest";
import { join, resolve } from "node:path";
import OpenAI from "openai";
import { mergeCalls, type PrefixBreak } from "../../../src/agent/index.js";
import type { AgentFunction } from "../../../src/contracts/agent.js";
import type { EpisodeSequence } from "../../../src/agent/episode.js";
import type { RolloutTrace } from "../../../src/agent/trace.js";
import type { RunResult } from "../../../src/outputs/events.js";
import { runRecipe } from "../../../src/index.js";
import type { InferenceClient, InferenceResult } from "../../../src/inference/index.js";
import { fixture, gateway, tempDir, tokenizer } from "../../support/agent.js";

/** The folder of the SDK examples. */
export const EXAMPLES = resolve(import.meta.dirname, "../../../examples/agents");

/** Whether this Node can run SDKs whose `engines` ask for `major` or later. */
export const nodeAtLeast = (major: number, minor = 0): boolean => {
  const [m, n] = process.versions.node.split(".").map(Number) as [number, number];
  return m > major || (m === major && n >= minor);
};

/** The default export of an example agent. */
export async function exampleAgent(file: string): Promise<AgentFunction> {
  return ((await import(join(EXAMPLES, file))) as { default: AgentFunction }).default;
}

/**
 * A policy that answers the calls of an episode with `replies` in turn (the byte tokenizer's
 * tokens of each, then its end token; logprob -1 each), reading the prompts as they come.
 */
export function scriptedInference(replies: readonly string[]): InferenceClient & { prompts: string[] } {
  const prompts: string[] = [];
  const answer = (promptTokens: number[]): InferenceResult => {
    const reply = replies[prompts.length] ?? "done";
    prompts.push(tokenizer.decode(promptTokens));
    const responseTokens = [...tokenizer.encode(reply), tokenizer.eosId];
    return {
      promptTokens,
      responseTokens,
      response: reply,
      logprobs: responseTokens.map(() => -1),
      finishReason: "stop",
    };
  };
  return {
    tokenizer,
    prompts,
    completion: async (prompt) => answer(typeof prompt === "string" ? tokenizer.encode(prompt) : prompt),
    chat: async (messages, options) => answer(tokenizer.applyChatTemplate([...messages], options)),
  };
}

/** One episode of `agent` through a fresh gateway whose calls `inference` answers. */
export async function episode(
  agent: AgentFunction,
  inference: InferenceClient,
  data: Record<string, unknown> = { question: "find a" },
): Promise<{ result: unknown; trace: RolloutTrace; sequences: EpisodeSequence[]; breaks: PrefixBreak[] }> {
  const g = await gateway();
  const session = g.openRollout(inference, { maxTokensPerCall: 64 });
  const controller = new AbortController();
  let result: unknown;
  try {
    result = await agent(
      {
        data,
        prompt: data.question as string,
        index: 0,
        epoch: 0,
        batchIndex: 0,
        groupId: "g",
        runId: 0,
        groupSize: 1,
        isVal: false,
        seed: 1,
      },
      {
        openai: new OpenAI({ baseURL: session.baseURL, apiKey: "nexrl-gateway", maxRetries: 0 }),
        baseURL: session.baseURL,
        model: "policy",
        signal: controller.signal,
      },
    );
  } finally {
    controller.abort();
  }
  const trace = session.finish();
  return { result, trace, ...mergeCalls(trace.calls, tokenizer, { merge: true }) };
}

/** Steps the tests train each example for. */
const STEPS = 2;

/**
 * A recipe of examples/agents trained for a few steps on the local backend, in a temporary folder.
 * Its reward is swapped for one that varies with the answer's characters: the untrained tiny model
 * never answers right, and GRPO skips groups whose rewards are all equal. `overrides` come last.
 */
export async function trainExample(recipe: string, overrides: string[] = []): Promise<RunResult> {
  const dir = await tempDir();
  return runRecipe(join(EXAMPLES, recipe), {
    outputDir: join(dir, "run"),
    env: {},
    cwd: EXAMPLES,
    overrides: [
      `trainer.total_train_steps=${STEPS}`,
      `rollout_worker.evaluator_module_path=${fixture("evaluators.ts")}:CharacterEvaluator`,
      ...overrides,
    ],
  });
}

/** The endpoints the calls of a run's samples (samples.jsonl) came through, each once. */
export async function endpointsCalled(result: RunResult): Promise<string[]> {
  const samples = (await readFile(join(result.outputDir, "samples.jsonl"), "utf8"))
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { calls: Array<{ endpoint: string }> });
  expect(samples.length).toBeGreaterThan(0);
  return [...new Set(samples.flatMap((s) => s.calls.map((c) => c.endpoint)))].sort();
}

/** The tool call the scripted policy writes first (Hermes format, as the byte chat template renders calls). */
export const LOOKUP_CALL = '<tool_call>{"name":"lookup","arguments":{"key":"a"}}</tool_call>';

/**
 * Checks a training run of {@link trainExample}: every step ran and trained, every episode of it is one
 * trajectory with no prefix break, and its episodes made `callsPerEpisode` calls (at least, for
 * agents whose loop depends on what the model writes).
 */
export function expectTrained(result: RunResult, callsPerEpisode: number | "at least one"): void {
  expect([result.steps, result.stopReason]).toEqual([STEPS, "completed"]);
  for (const row of result.metrics) {
    expect(row).toMatchObject({
      "agent/episodes": 4,
      "agent/trajectories": 4,
      "agent/prefix_breaks": 0,
      "rollout/num_trajectories": 4,
      "train/skipped": 0,
    });
    if (callsPerEpisode === "at least one") expect(row["agent/calls"]).toBeGreaterThanOrEqual(4);
    else expect(row["agent/calls"]).toBe(4 * callsPerEpisode);
    expect(row["train/num_tokens"]).toBeGreaterThan(0);
  }
}

/**
 * Checks an episode of the tool loop against the scripted policy: the model asked for
 * `lookup({ key: "a" })`, the SDK ran it and sent back its result (`7`) after the call, the model
 * answered `7`; the two calls merge into one trajectory with no break, both replies trained.
 */
export function expectToolLoop(run: Awaited<ReturnType<typeof episode>>, policy: { prompts: string[] }): void {
  const { trace, sequences, breaks } = run;
  expect(trace.calls.map((c) => c.finishReason)).toEqual(["tool_calls", "stop"]);
  expect(trace.calls[0]!.toolCalls.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
    ["lookup", { key: "a" }],
  ]);
  // The second prompt continues the first call's tokens with the tool's result, then asks for the answer.
  expect(policy.prompts[1]!.startsWith(`${policy.prompts[0]}${LOOKUP_CALL}<|tool|>\n7`)).toBe(true);
  expect(trace.calls[1]!.reply.content).toBe("7");
  expect(breaks).toEqual([]);
  expect(sequences).toHaveLength(1);
  const [seq] = sequences;
  const trained = tokenizer.decode(seq!.tokens.filter((_, i) => seq!.lossMask[i] === 1));
  expect(trained).toBe(`${LOOKUP_CALL}${tokenizer.decode([tokenizer.eosId])}7${tokenizer.decode([tokenizer.eosId])}`);
}
