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
  /** Share of the loss of this trajectory's trained tokens (default 1; an agent episode splits 1 over its trajectories). */
  lossWeight?: number;
  /** Which side of a preference pair it is, for the preference trainers (`remote_api_dpo`, `remote_api_reward_model`). */
  preference?: PreferenceSide;
  /** Numbers averaged over the step's trajectories as `rollout/score/<key>_mean` (booleans count as 0 and 1). */
  score?: Record<string, number | boolean>;
  /** Numbers added up over the step's trajectories into the step's metrics, under their own keys. */
  counters?: Record<string, number>;
  /** Anything else the worker wants to carry (the response text, the answer, …): shown in `samples.jsonl`, read by nothing else. */
  extraFields?: Record<string, unknown>;
}

/** Which side of a preference pair a trajectory is. */
export type PreferenceSide = "chosen" | "rejected";

/**
 * The typed fields that earlier versions read from `extraFields` (by the same names in
 * snake_case), which `samples.jsonl` still shows there.
 */
export const TYPED_EXTRA_FIELDS = {
  lossWeight: "loss_weight",
  preference: "preference",
  score: "score",
  counters: "counters",
} as const;

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
  /** Share of the loss of its trained tokens; undefined for 1. */
  lossWeight?: number;
  /** Its side of a preference pair. */
  preference?: PreferenceSide;
  /** Numbers averaged per step as `rollout/score/<key>_mean`. */
  score?: Record<string, number | boolean>;
  /** Numbers summed into the step's metrics. */
  counters?: Record<string, number>;
  /** The worker's own fields, shown in `samples.jsonl`. */
  extraFields: Record<string, unknown>;

  /**
   * Takes the given fields; arrays are used as they are (not copied). `loss_weight`,
   * `preference`, `score` and `counters` in `extraFields` (where earlier versions read them, and
   * saved checkpoints hold them) become the typed fields, when those are not given.
   */
  constructor(init: TrajectoryInit) {
    this.tokens = init.tokens;
    this.lossMask = init.lossMask;
    this.reward = init.reward;
    this.isVal = init.isVal ?? false;
    const extraFields = init.extraFields ?? {};
    this.extraFields = extraFields;
    this.lossWeight = init.lossWeight;
    this.preference = init.preference;
    this.score = init.score;
    this.counters = init.counters;
    if (Object.values(TYPED_EXTRA_FIELDS).some((key) => Object.hasOwn(extraFields, key)))
      this.adoptLegacyFields(extraFields);
    this.logprobs = init.logprobs;
    this.advantage = init.advantage;
    this.advantages = init.advantages;
    this.groupId = init.groupId;
    this.runId = init.runId;
    this.policyVersion = init.policyVersion;
  }

  /**
   * Takes the typed fields' snake_case keys out of `extraFields` (into a copy) for the fields
   * still unset, as earlier versions read them: `loss_weight` as it is (validate() refuses a bad
   * one, as before), `preference` when it names a side, and the numbers (and, for `score`,
   * booleans) of a `score` or `counters` object. Anything else there stays in `extraFields`, the
   * worker's own.
   */
  private adoptLegacyFields(extraFields: Record<string, unknown>): void {
    const own = { ...extraFields };
    const take = (key: string): unknown => {
      const value = own[key];
      delete own[key];
      return value;
    };
    if (Object.hasOwn(own, "loss_weight")) this.lossWeight ??= take("loss_weight") as number;
    if (own.preference === "chosen" || own.preference === "rejected")
      this.preference ??= take("preference") as PreferenceSide;
    for (const field of ["score", "counters"] as const) {
      const value = own[field];
      if (!isPlainObject(value) || this[field] !== undefined) continue;
      const booleans = field === "score";
      const numbers = Object.fromEntries(Object.entries(value).filter(([, entry]) => isNumberEntry(entry, booleans)));
      this[field] = numbers as Record<string, number>;
      // A map with other values too stays, as samples.jsonl showed it.
      if (Object.keys(numbers).length === Object.keys(value).length) delete own[field];
    }
    this.extraFields = own;
  }

  /** Number of positions trained on (sum of the loss mask). */
  get numLossTokens(): number {
    let n = 0;
    for (const m of this.lossMask) n += m;
    return n;
  }

  /**
   * Checks the invariants every consumer relies on.
   * @throws {@link "nexrl/errors".InputError | InputError} naming the first bad field: empty or invalid `tokens`,
   *   `lossMask` / `logprobs` / `advantages` of the wrong length, mask values other than 0/1,
   *   non-finite `reward`, `logprobs`, `advantage` or `advantages`, a `lossWeight` that is not a
   *   finite number ≥ 0, a `preference` other than `chosen` or `rejected`, `score` or `counters`
   *   that are not objects of (finite) numbers.
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
    const weight = this.lossWeight;
    if (weight !== undefined && (typeof weight !== "number" || !Number.isFinite(weight) || weight < 0))
      this.fail("lossWeight", `is ${describeValue(weight)}; it must be a finite number >= 0 (or absent for 1)`);
    const side = this.preference;
    if (side !== undefined && side !== "chosen" && side !== "rejected")
      this.fail("preference", `is ${describeValue(side)}; it must be "chosen" or "rejected"`);
    this.checkNumbers("score", this.score, true);
    this.checkNumbers("counters", this.counters, false);
    return this;
  }

  private checkNumbers(field: "score" | "counters", values: object | undefined, booleans: boolean): void {
    if (values === undefined) return;
    if (!isPlainObject(values))
      this.fail(field, `is ${describeValue(values)}; it must be an object of numbers by name`);
    for (const [key, value] of Object.entries(values)) {
      if (isNumberEntry(value, booleans)) continue;
      this.fail(
        `${field}.${key}`,
        `is ${describeValue(value)}; it must be a finite number${booleans ? " or a boolean" : ""}`,
      );
    }
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

function isPlainObject(value: unknown): value is object {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isNumberEntry(value: unknown, booleans: boolean): boolean {
  return (typeof value === "number" && Number.isFinite(value)) || (booleans && typeof value === "boolean");
}

/** A value as a message shows it: numbers as they are, anything else with its type (`the string "1"`). */
function describeValue(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === "boolean" || typeof value === "bigint") return `the ${typeof value} ${String(value)}`;
  return Array.isArray(value) ? "an array" : `a ${typeof value}`;
}
