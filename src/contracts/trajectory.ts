import { InputError } from "../errors.js";

/** The plain object a {@link Trajectory} is built from. */
export interface TrajectoryInit {
  /** Prompt and response token ids, the full sequence. */
  tokens: number[];
  /** 1 where a token is trained on (sampled response), 0 elsewhere (prompt, tool output). */
  lossMask: number[];
  /** Scalar reward of the whole trajectory. */
  reward: number;
  /** True for validation rollouts, which are scored but never trained on. */
  isVal?: boolean;
  /** Sampler logprob of each token (same length as `tokens`; prompt positions are 0). */
  logprobs?: number[];
  /** Scalar advantage, applied to every loss-mask position. */
  advantage?: number;
  /** Per-token advantages (same length as `tokens`). */
  advantages?: number[];
  /** Rollouts of the same task share a group id (GRPO groups). */
  groupId?: string;
  /** Index of this rollout within its group. */
  runId?: number;
  /** Version of the policy (training step) whose weights sampled this trajectory. */
  policyVersion?: number;
  /** Anything else the worker wants to carry (scores, the response text, …). */
  extraFields?: Record<string, unknown>;
}

/**
 * One sampled sequence with what training needs: tokens, which of them to train on, and the
 * reward. Workers build them from plain objects; trainers add advantages.
 *
 * @example
 * ```ts
 * const t = new Trajectory({ tokens: [1, 2, 3], lossMask: [0, 1, 1], reward: 1 });
 * t.validate();
 * ```
 */
export class Trajectory {
  /** Prompt and response token ids. */
  tokens: number[];
  /** 1 where a token is trained on, 0 elsewhere. */
  lossMask: number[];
  /** Scalar reward. */
  reward: number;
  /** True for validation rollouts. */
  isVal: boolean;
  /** Sampler logprobs, one per token, when the worker has them. */
  logprobs?: number[];
  /** Scalar advantage. */
  advantage?: number;
  /** Per-token advantages. */
  advantages?: number[];
  /** Group id shared by rollouts of the same task. */
  groupId?: string;
  /** Index within the group. */
  runId?: number;
  /** Policy version that sampled it. */
  policyVersion?: number;
  /** Extra fields carried along for metrics and samples. */
  extraFields: Record<string, unknown>;

  /** Takes the given fields; arrays are used as they are (not copied). */
  constructor(init: TrajectoryInit) {
    this.tokens = init.tokens;
    this.lossMask = init.lossMask;
    this.reward = init.reward;
    this.isVal = init.isVal ?? false;
    this.extraFields = init.extraFields ?? {};
    this.logprobs = init.logprobs;
    this.advantage = init.advantage;
    this.advantages = init.advantages;
    this.groupId = init.groupId;
    this.runId = init.runId;
    this.policyVersion = init.policyVersion;
  }

  /** Number of positions trained on (sum of the loss mask). */
  get numLossTokens(): number {
    let n = 0;
    for (const m of this.lossMask) n += m;
    return n;
  }

  /**
   * Checks the invariants every consumer relies on.
   * @throws {@link InputError} naming the first bad field: empty or invalid `tokens`,
   *   `lossMask` / `logprobs` / `advantages` of the wrong length, mask values other than 0/1,
   *   non-finite `reward`, `logprobs`, `advantage` or `advantages`.
   */
  validate(): this {
    // Plain loops, and messages built only on failure: this runs on every rollout.
    const { tokens, lossMask } = this;
    if (!Array.isArray(tokens) || tokens.length === 0)
      this.fail("tokens", "is empty; a trajectory needs at least one token");
    const n = tokens.length;
    for (let i = 0; i < n; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t! < 0)
        this.fail("tokens", `[${i}] is ${describeValue(t)}; token ids are non-negative integers`);
    }
    this.checkLength("lossMask", lossMask, n);
    for (let i = 0; i < n; i++) {
      const m = lossMask[i];
      if (m !== 0 && m !== 1) this.fail("lossMask", `[${i}] is ${describeValue(m)}; mask values are 0 or 1`);
    }
    if (typeof this.reward !== "number" || !Number.isFinite(this.reward))
      this.fail("reward", `is ${describeValue(this.reward)}; it must be a finite number`);
    this.checkFinite("logprobs", this.logprobs, n);
    this.checkFinite("advantages", this.advantages, n);
    if (this.advantage !== undefined && !Number.isFinite(this.advantage))
      this.fail("advantage", `is ${describeValue(this.advantage)}; it must be a finite number`);
    return this;
  }

  private checkLength(field: string, values: unknown, n: number): asserts values is unknown[] {
    if (!Array.isArray(values)) this.fail(field, "must be an array");
    if (values.length !== n)
      this.fail(field, `has length ${values.length} but tokens has length ${n}; they must match`);
  }

  private checkFinite(field: "logprobs" | "advantages", values: number[] | undefined, n: number): void {
    if (values === undefined) return;
    this.checkLength(field, values, n);
    for (let i = 0; i < n; i++) {
      const v = values[i];
      if (typeof v !== "number" || !Number.isFinite(v))
        this.fail(field, `[${i}] is ${describeValue(v)}; it must be a finite number`);
    }
  }

  private fail(field: string, what: string): never {
    throw new InputError(`Trajectory${this.describe()}: ${field} ${what}`, { field: field });
  }

  private describe(): string {
    const parts: string[] = [];
    if (this.groupId !== undefined) parts.push(`group ${this.groupId}`);
    if (this.runId !== undefined) parts.push(`run ${this.runId}`);
    return parts.length ? ` (${parts.join(", ")})` : "";
  }
}

/** A value as a message shows it: numbers as they are, anything else with its type (`the string "1"`). */
function describeValue(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === "boolean" || typeof value === "bigint") return `the ${typeof value} ${String(value)}`;
  return Array.isArray(value) ? "an array" : `a ${typeof value}`;
}
