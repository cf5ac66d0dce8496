/**
 * Decoded trajectories for `samples.jsonl`.
 * @module
 */
import type { Tokenizer } from "../wire/tokenizer.js";
import { TYPED_EXTRA_FIELDS, type Trajectory } from "../contracts/trajectory.js";
import type { JudgeRecord } from "../rewards/math-judge.js";
import type { FinishReason } from "../contracts/inference.js";
import type { StepRow } from "./jsonl-log.js";
import { targetOf } from "../rollouts/validation-examples.js";
import { VALIDATION_TARGET } from "../rollouts/validation-nll.js";

/** One line of `samples.jsonl`; its keys are the file's (snake_case), as other tools read them. */
export interface SampleRow extends StepRow {
  /** Group id. */
  group: string | null;
  /** Run id within the group. */
  run: number | null;
  /** Reward. */
  reward: number;
  /** Scalar advantage, or the mean of the per-token advantages over trained tokens; null when none was set. */
  advantage: number | null;
  /** Policy version that sampled it. */
  policy_version: number | null;
  /** Decoded tokens before the first trained token (an id without a token shows as `<unk:ID>`). */
  prompt: string;
  /** Decoded tokens from the first trained token on. */
  response: string;
  /** The trajectory's `extraFields.diagnostics` (such as an agent's prefix breaks), when it has any. */
  diagnostics?: SampleDiagnostic[];
  /** Token by token, the part `response` decodes (for the run report's token view). */
  response_tokens: ResponseTokens;
  /** What an agent's gateway recorded of each call merged into it (`extraFields.calls`), when it has any. */
  calls?: SampleCall[];
  /** The LLM judge's verdict (`extraFields.judge`: its score, rank, words and attempts), when a judge scored it. */
  judge?: JudgeRecord;
  /** False for a rollout the trainer did not train on (a constant-reward group, say), and for validation rollouts. */
  trained: boolean;
  /** True for a validation rollout: what the weights of `step` answered to a validation row. */
  validation?: true;
  /** For a validation rollout, what it should have answered, when the worker recorded it (`extraFields.answer`, `ground_truth` or `expected`). */
  target?: string;
  /** The worker's other `extraFields` (all but `diagnostics`, `calls`, `judge` and `validation_target`), when it set any. */
  extra_fields?: Record<string, unknown>;
}

/** Why a trajectory looks as it does (an agent's break in continuity, say), in {@link SampleRow.diagnostics}. */
export interface SampleDiagnostic {
  /** What it is about: `prefix_break` for an agent's turn that does not continue the one before. */
  kind: string;
  /** What happened, in words. */
  message: string;
  /** The specifics of the kind (for `prefix_break`: `turn`, `previous_turn`, `first_differing_index`, the tokens and text around it). */
  [detail: string]: unknown;
}

/** What an agent's gateway recorded of one model call, in {@link SampleRow.calls}. */
export interface SampleCall {
  /** The agent's turn, from 1. */
  turn: number;
  /** The API called. */
  endpoint: "chat.completions" | "completions" | "responses" | "messages";
  /** Tokens of the prompt. */
  prompt_tokens: number;
  /** Tokens sampled. */
  completion_tokens: number;
  /** Why sampling stopped. */
  finish_reason: FinishReason | "tool_calls";
  /** The tools the model called, by name. */
  tool_calls: string[];
  /** Tool calls that could not be parsed (answered as text), when there were any. */
  malformed_tool_calls?: number;
  /** When the call started (ISO 8601). */
  started_at: string;
  /** How long it took, in milliseconds. */
  duration_ms: number;
  /** The policy version that answered, when known. */
  policy_version?: number;
  /** Which token ids the inference client tokenized again from text instead of reporting them (never for a sampler). */
  retokenized?: Array<"prompt" | "response">;
}

/** The response of a {@link SampleRow} token by token, as parallel arrays (keys as in the file). */
export interface ResponseTokens {
  /** Token ids. */
  ids: number[];
  /** Each token decoded alone (`""` for a special token, `\uFFFD` for part of a character). */
  text: string[];
  /** 1 where the token is trained on. */
  loss_mask: number[];
  /** Per-token advantage (the scalar advantage on trained tokens, 0 elsewhere), rounded to 4 decimals; absent when none was set. */
  advantages?: number[];
  /** The sampler's logprob of each token (0 off the mask), rounded to 4 decimals; absent when the worker had none. */
  logprobs?: number[];
}

/** Ids the tokenizer does not know are shown as `<unk:ID>` (the trajectory keeps them). */
const PLACEHOLDERS = { unknownIds: "placeholder" } as const;

/** Rounds to 4 decimals: enough to read, and keeps `samples.jsonl` small. */
const round4 = (x: number): number => Math.round(x * 1e4) / 1e4;

/** The tokens of `t` from `split` on, each decoded alone, with their mask, advantages and logprobs. */
function responseTokens(t: Trajectory, split: number, tokenizer: Tokenizer): ResponseTokens {
  const ids = t.tokens.slice(split);
  const mask = t.lossMask.slice(split);
  const advantages =
    t.advantages?.slice(split) ?? (t.advantage === undefined ? undefined : mask.map((m) => m * t.advantage!));
  return {
    ids,
    text: ids.map((id) => tokenizer.decode([id], PLACEHOLDERS)),
    loss_mask: mask,
    ...(advantages && { advantages: advantages.map(round4) }),
    ...(t.logprobs && { logprobs: t.logprobs.slice(split).map(round4) }),
  };
}

/** A trajectory's non-empty `extraFields.diagnostics`: the entries with a `kind` and a `message`. */
function diagnosticsOf(t: Trajectory): SampleDiagnostic[] | undefined {
  const diagnostics = t.extraFields.diagnostics;
  if (!Array.isArray(diagnostics)) return undefined;
  const described = diagnostics.filter(
    (d: unknown): d is SampleDiagnostic =>
      typeof (d as SampleDiagnostic | null)?.kind === "string" && typeof (d as SampleDiagnostic).message === "string",
  );
  return described.length > 0 ? described : undefined;
}

/** A trajectory's non-empty `extraFields.calls`, which the agent service's episodes record (`SampleCall`s). */
function callsOf(t: Trajectory): SampleCall[] | undefined {
  const calls = t.extraFields.calls;
  return Array.isArray(calls) && calls.length > 0 ? (calls as SampleCall[]) : undefined;
}

/** Fields of `extraFields` a sample row shows on their own. */
const SHOWN_APART = new Set(["diagnostics", "calls", "judge", VALIDATION_TARGET]);

/**
 * The worker's other `extraFields`, as JSON can hold them (a value it cannot is described
 * instead), with the typed fields that earlier versions kept there under their old keys
 * (`loss_weight`, `preference`, `score`, `counters`), so that the rows read as before.
 */
function otherExtraFields(t: Trajectory): Record<string, unknown> | undefined {
  const typed = Object.entries(TYPED_EXTRA_FIELDS).flatMap(([field, key]) => {
    const value = t[field as keyof typeof TYPED_EXTRA_FIELDS];
    return value === undefined ? [] : [[key, value] as const];
  });
  const entries = [...typed, ...Object.entries(t.extraFields).filter(([key]) => !SHOWN_APART.has(key))];
  if (entries.length === 0) return undefined;
  const fields: Record<string, unknown> = {};
  for (const [key, value] of entries) {
    try {
      fields[key] = value === undefined ? null : JSON.parse(JSON.stringify(value));
    } catch (error) {
      fields[key] = `<not JSON: ${(error as Error).message}>`;
    }
  }
  return fields;
}

/**
 * Up to `count` trajectories spread evenly over the step's `batch` (trained on or not), then
 * every other trajectory of `batch` with diagnostics, decoded; each row says whether it was among
 * `trajectories`, those the trainer trained on. When the trainer returned trajectories of its
 * own making (not the batch's), the rows come from those.
 */
export function sampleRows(
  step: number,
  trajectories: readonly Trajectory[],
  tokenizer: Tokenizer,
  count: number,
  batch: readonly Trajectory[] = trajectories,
): SampleRow[] {
  const trained = new Set(trajectories);
  const inBatch = new Set(batch);
  const pool = trajectories.every((t) => inBatch.has(t)) ? batch : trajectories;
  const picked = new Set<Trajectory>(spread(pool, count));
  for (const t of batch) if (diagnosticsOf(t)) picked.add(t);
  return [...picked].map((t) => sampleRow(step, t, tokenizer, trained.has(t)));
}

/** Evenly spread picks of `count` items of `items` (all of them when there are fewer), in order. */
function spread<T>(items: readonly T[], count: number): T[] {
  const n = Math.min(count, items.length);
  return Array.from({ length: n }, (_, k) => items[Math.floor((k * items.length) / n)]!);
}

/** The row of one trajectory. */
function sampleRow(step: number, t: Trajectory, tokenizer: Tokenizer, trained: boolean): SampleRow {
  const split = t.lossMask.indexOf(1) < 0 ? t.tokens.length : t.lossMask.indexOf(1);
  let advantage: number | null = t.advantage ?? null;
  if (t.advantages) {
    const onMask = t.advantages.filter((_, j) => t.lossMask[j] === 1);
    advantage = onMask.length ? onMask.reduce((a, b) => a + b, 0) / onMask.length : 0;
  }
  return {
    step,
    group: t.groupId ?? null,
    run: t.runId ?? null,
    reward: t.reward,
    advantage,
    policy_version: t.policyVersion ?? null,
    // Ids the tokenizer has no token for (a sampler's, beyond its vocabulary) show as <unk:ID>.
    prompt: tokenizer.decode(t.tokens.slice(0, split), PLACEHOLDERS),
    response: tokenizer.decode(t.tokens.slice(split), PLACEHOLDERS),
    ...(diagnosticsOf(t) && { diagnostics: diagnosticsOf(t) }),
    response_tokens: responseTokens(t, split, tokenizer),
    ...(callsOf(t) && { calls: callsOf(t) }),
    // Set by the math worker's judge (rewards/math-judge.ts).
    ...(t.extraFields.judge !== undefined && { judge: t.extraFields.judge as JudgeRecord }),
    trained,
    ...(otherExtraFields(t) && { extra_fields: otherExtraFields(t) }),
  };
}

/**
 * Up to `count` rollouts of the validation at `step`, spread evenly over the validation rows (the
 * same rows each time), decoded as {@link sampleRows} does and marked `validation: true`, with
 * their `target` when the worker recorded one. The response is what the model wrote.
 */
export function validationSampleRows(
  step: number,
  trajectories: readonly Trajectory[],
  tokenizer: Tokenizer,
  count: number,
): SampleRow[] {
  return spread(trajectories, count).map((t) => {
    const target = targetOf(t.extraFields);
    return { ...sampleRow(step, t, tokenizer, false), validation: true, ...(target !== undefined && { target }) };
  });
}
