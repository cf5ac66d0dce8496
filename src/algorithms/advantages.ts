/**
 * Group-relative advantages (GRPO and Dr.GRPO).
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import { InputError } from "../errors.js";
import { maxOf } from "../wire/arrays.js";

/** Largest reward magnitude whose squares cannot overflow a double in a group's σ. */
const PLAIN_RANGE = 1e150;

/** Options of {@link groupAdvantages}. */
export interface GroupAdvantageOptions {
  /**
   * `grpo` (default): A = (r − μ_g) / (σ_g + ε) when `normalizeStd`, else r − μ_g.
   * `dr_grpo` (Dr.GRPO): A = r − μ_g, never divided by σ_g; with the services' token-sum losses
   * there is no per-sequence length normalisation either, which is the rest of Dr.GRPO's fix.
   */
  estimator?: "grpo" | "dr_grpo";
  /** `grpo` only: divide by the group's reward standard deviation (default true). */
  normalizeStd?: boolean;
  /** ε added to σ_g (default 1e-6). */
  epsilon?: number;
}

/** The advantages of a batch and what the groups looked like. */
export interface GroupAdvantages {
  /** One advantage per trajectory, in input order; 0 in constant groups. */
  advantages: number[];
  /** Per trajectory: whether its group's rewards were all equal (including groups of one run). */
  constant: boolean[];
  /** Number of groups. */
  groups: number;
  /** Groups whose rewards were all equal: they carry no learning signal. */
  constantGroups: number;
  /** σ_g of each group with more than one run (population standard deviation of the run rewards). */
  groupStd: number[];
}

/**
 * Advantages relative to each group (trajectories sharing `groupId`; a trajectory without one is
 * a group of its own). Rewards are first averaged per run (`runId`), so a rollout that produced
 * several trajectories counts once; μ_g and σ_g are the mean and population standard deviation
 * of those run means; each trajectory's advantage uses its own reward. A group whose run means
 * are all equal — including a group of a single run — gets advantage 0 (never its raw reward).
 * Rewards beyond ±1e150 are divided by the group's largest before μ_g and σ_g are taken, so the
 * squares do not overflow (the normalised advantage does not depend on that scale).
 * @throws {@link "nexrl/errors".InputError | InputError} when an advantage is beyond the ±3.4e38 of a 32-bit float (rewards
 *   that large without the division by σ_g), naming the group and its rewards.
 */
export function groupAdvantages(
  trajectories: readonly Trajectory[],
  options: GroupAdvantageOptions = {},
): GroupAdvantages {
  const { estimator = "grpo", normalizeStd = true, epsilon = 1e-6 } = options;
  const groups = new Map<string, number[]>();
  trajectories.forEach((t, i) => {
    const key = t.groupId ?? `\u0000${i}`;
    groups.set(key, [...(groups.get(key) ?? []), i]);
  });
  const advantages = trajectories.map(() => 0);
  const constant = trajectories.map(() => true);
  const groupStd: number[] = [];
  let constantGroups = 0;
  for (const members of groups.values()) {
    const runs = new Map<string, number[]>();
    for (const i of members) {
      const run = trajectories[i]!.runId === undefined ? `\u0000${i}` : String(trajectories[i]!.runId);
      runs.set(run, [...(runs.get(run) ?? []), trajectories[i]!.reward]);
    }
    const largest = maxOf([...runs.values()].flat().map(Math.abs));
    const unit = largest > PLAIN_RANGE ? largest : 1;
    const means = [...runs.values()].map((rewards) => rewards.reduce((a, b) => a + b / unit, 0) / rewards.length);
    const mu = means.reduce((a, b) => a + b, 0) / means.length;
    const sigma = Math.sqrt(means.reduce((a, m) => a + (m - mu) ** 2, 0) / means.length);
    if (means.length > 1) groupStd.push(sigma * unit);
    if (means.every((m) => m === means[0])) {
      constantGroups++;
      continue;
    }
    const scale = estimator === "grpo" && normalizeStd ? 1 / (sigma + epsilon / unit) : unit;
    for (const i of members) {
      const advantage = (trajectories[i]!.reward / unit - mu) * scale;
      // Advantages travel as 32-bit floats.
      if (!Number.isFinite(Math.fround(advantage)))
        throw overflowError(trajectories[i]!.groupId, [...runs.values()].flat());
      advantages[i] = advantage;
      constant[i] = false;
    }
  }
  return { advantages, constant, groups: groups.size, constantGroups, groupStd };
}

function overflowError(groupId: string | undefined, rewards: readonly number[]): InputError {
  return new InputError(
    `the advantages of group ${groupId ?? "(none)"} overflow: its rewards (${rewards.join(", ")}) give advantages beyond the ±3.4e38 of the 32-bit floats they are trained as; give rewards of a sensible scale (for example within ±1e6) in the worker`,
    { field: "reward" },
  );
}
