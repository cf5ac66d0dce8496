/**
 * Row 4 of the pipeline suite, in its own process (forked with --expose-gc by the suite): RSS
 * while the trajectory pool holds finished groups, built as a worker builds them
 * (`completionTrajectory` over an inference result parsed from JSON, the response text kept in
 * `extraFields`). RSS is read empty, after `tokens` tokens and after twice as many: the second
 * half's growth is the cost per token held, without the fixed costs the first half pays (the
 * young generation growing to its full size). Sends `{ emptyMb, halfMb, fullMb, tokens }` (tokens
 * of the second half) to the parent.
 *
 * Arguments: tokens per half, tokens per trajectory.
 */
import process from "node:process";
import { TrajectoryPool } from "../../dist/rollouts/pool.js";
import type { RolloutTask, TaskGroup } from "../../dist/contracts/task.js";
import { completionTrajectory } from "../../dist/workers/completion-trajectory.js";
import type { InferenceResult } from "../../dist/contracts/inference.js";

const total = Number(process.argv[2]);
const length = Number(process.argv[3]);
const GROUP_SIZE = 8;
const PROMPT_SHARE = 0.1;

const gc = globalThis.gc;
if (!gc) throw new Error("run with --expose-gc");
const rssMb = (): number => {
  gc();
  gc();
  return process.memoryUsage().rss / 2 ** 20;
};

/** An inference result as the OpenAI-compatible client returns it: arrays parsed from the server's JSON, about 4 characters of text per token. */
function inferenceResult(seed: number): InferenceResult {
  const prompt = Math.round(length * PROMPT_SHARE);
  const response = length - prompt;
  const json = JSON.stringify({
    prompt_token_ids: Array.from({ length: prompt }, (_, i) => (seed * 7919 + i * 31) % 151_000),
    token_ids: Array.from({ length: response }, (_, i) => (seed * 104_729 + i * 17) % 151_000),
    logprobs: Array.from({ length: response }, (_, i) => Math.fround(-((seed + i) % 97) / 31)),
    text: "word".repeat(response),
  });
  const body = JSON.parse(json) as {
    prompt_token_ids: number[];
    token_ids: number[];
    logprobs: number[];
    text: string;
  };
  return {
    promptTokens: body.prompt_token_ids,
    responseTokens: body.token_ids,
    response: body.text,
    logprobs: body.logprobs,
    finishReason: "stop",
    policyVersion: 0,
  };
}

const pool = new TrajectoryPool({
  readiness: "batch_size_reached",
  batchSize: Number.MAX_SAFE_INTEGER,
  stalenessThreshold: 1,
});
const groupsPerHalf = Math.ceil(total / length / GROUP_SIZE);

function fill(from: number): void {
  for (let g = from; g < from + groupsPerHalf; g++) {
    const groupId = `0-${g}`;
    const tasks = Array.from({ length: GROUP_SIZE }, (_, runId): RolloutTask => ({
      data: { prompt: "" },
      prompt: "",
      index: g,
      epoch: 0,
      batchIndex: 0,
      groupId,
      runId,
      groupSize: GROUP_SIZE,
      isVal: false,
      seed: g * GROUP_SIZE + runId,
    }));
    const group: TaskGroup = { groupId, index: g, epoch: 0, batchIndex: 0, tasks };
    pool.register(group);
    for (const task of tasks) {
      const t = completionTrajectory(inferenceResult(task.seed), task.runId % 2);
      t.groupId = groupId;
      t.runId = task.runId;
      t.policyVersion = 0;
      pool.put(task, [t]);
    }
  }
}

const emptyMb = rssMb();
fill(0);
const halfMb = rssMb();
fill(groupsPerHalf);
const fullMb = rssMb();
if (pool.readyTrajectories !== 2 * groupsPerHalf * GROUP_SIZE)
  throw new Error(`the pool holds ${pool.readyTrajectories} trajectories, expected ${2 * groupsPerHalf * GROUP_SIZE}`);
process.send!({ emptyMb, halfMb, fullMb, tokens: groupsPerHalf * GROUP_SIZE * length });
