/**
 * Trace → token sequences: consecutive calls whose token histories are exactly continuous merge
 * into one sequence; every break in continuity is located and explained.
 * @module
 */
import type { Tokenizer } from "../wire/tokenizer.js";
import type { GatewayCall } from "./trace.js";
import { appendAll } from "../wire/arrays.js";

/** One trainable sequence made of one or more consecutive calls. */
export interface MergedSequence {
  /** Prompt and sampled tokens of every merged call. */
  tokens: number[];
  /** 1 on sampled tokens, 0 on prompt, tool-output and template tokens. */
  lossMask: number[];
  /** Sampler logprob of each sampled token, 0 elsewhere. */
  logprobs: number[];
  /** Turns merged, in order. */
  turns: number[];
  /** Oldest policy version among the merged calls, when reported. */
  policyVersion?: number;
}

/** Where a call's prompt stopped continuing the previous call's prompt and completion. */
export interface PrefixBreak {
  /** The call that broke continuity (from 1). */
  turn: number;
  /** The call it was compared with. */
  previousTurn: number;
  /** Index of the first token that differs (or the length of the shorter sequence). */
  firstDifferingIndex: number;
  /** Previous prompt + completion at that index, or null when the new prompt is longer there. */
  expectedToken: number | null;
  /** New prompt at that index, or null when it ended there. */
  actualToken: number | null;
  /** Decoded tokens before the difference, shared by both. */
  context: string;
  /** Decoded previous prompt + completion from the difference on. */
  expected: string;
  /** Decoded new prompt from the difference on. */
  actual: string;
}

/** What {@link mergeCalls} returns. */
export interface MergedTrace {
  /** The sequences, in turn order. */
  sequences: MergedSequence[];
  /** One entry per break in continuity. */
  breaks: PrefixBreak[];
}

/** Tokens decoded on each side of a break in its explanation. */
const WINDOW = 48;

function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

/** Diagnostics show ids without a token as `<unk:ID>` rather than failing. */
const PLACEHOLDERS = { unknownIds: "placeholder" } as const;

function explain(
  tokenizer: Tokenizer,
  previous: GatewayCall,
  expected: readonly number[],
  call: GatewayCall,
): PrefixBreak {
  const actual = call.promptTokens;
  const at = firstDifference(expected, actual);
  return {
    turn: call.turn,
    previousTurn: previous.turn,
    firstDifferingIndex: at,
    expectedToken: expected[at] ?? null,
    actualToken: actual[at] ?? null,
    context: tokenizer.decode(expected.slice(Math.max(0, at - WINDOW), at), PLACEHOLDERS),
    expected: tokenizer.decode(expected.slice(at, at + WINDOW), PLACEHOLDERS),
    actual: tokenizer.decode(actual.slice(at, at + WINDOW), PLACEHOLDERS),
  };
}

function startsWith(tokens: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= tokens.length && firstDifference(tokens, prefix) === prefix.length;
}

function minVersion(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

/** Options of {@link mergeCalls}. */
export interface MergeOptions {
  /** Merge continuous calls (default true); false makes one sequence of each call, with no breaks to report. */
  merge?: boolean;
}

/**
 * Merges `calls` (in turn order). Call k+1 extends the current sequence when its prompt starts
 * with call k's prompt + completion: the new prompt tokens join with mask 0, its completion with
 * mask 1 and its logprobs. Otherwise the current sequence ends, a new one starts with call k+1,
 * and the break is recorded with the first differing token and both sides decoded. With
 * `options.merge` false (`rollout_worker.enable_trace_prefix_merge: false`) every call is a
 * sequence of its own.
 */
export function mergeCalls(
  calls: readonly GatewayCall[],
  tokenizer: Tokenizer,
  options: MergeOptions = {},
): MergedTrace {
  const merge = options.merge ?? true;
  const sequences: MergedSequence[] = [];
  const breaks: PrefixBreak[] = [];
  let current: MergedSequence | undefined;
  let previous: GatewayCall | undefined;
  for (const call of calls) {
    const expected = merge && previous ? [...previous.promptTokens, ...previous.completionTokens] : undefined;
    const continues = current !== undefined && expected !== undefined && startsWith(call.promptTokens, expected);
    if (!continues) {
      if (previous && expected) breaks.push(explain(tokenizer, previous, expected, call));
      current = { tokens: [], lossMask: [], logprobs: [], turns: [] };
      sequences.push(current);
    }
    const seq = current!;
    const added = call.promptTokens.slice(seq.tokens.length);
    appendAll(seq.tokens, added, call.completionTokens);
    appendAll(
      seq.lossMask,
      added.map(() => 0),
      call.completionTokens.map(() => 1),
    );
    appendAll(
      seq.logprobs,
      added.map(() => 0),
      call.logprobs,
    );
    seq.turns.push(call.turn);
    const version = minVersion(seq.policyVersion, call.policyVersion);
    if (version !== undefined) seq.policyVersion = version;
    previous = call;
  }
  return { sequences, breaks };
}
