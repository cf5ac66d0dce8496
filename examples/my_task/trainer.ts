/**
 * The "Custom Trainer" of the Weaver fine-tuning guide, in TypeScript: the algorithm is
 * `prepareTrajectories`, which sets each trajectory's advantage; datums, the loss call, the
 * optimizer step and weight sync come from BaseTrainer.
 */
import { BaseTrainer, type Trajectory } from "nexrl";

export class MyAlgorithmTrainer extends BaseTrainer {
  protected prepareTrajectories(trajectories: Trajectory[], metrics: Record<string, number>): Trajectory[] {
    for (const traj of trajectories) traj.advantage = traj.reward;
    // Every key added here ends up in metrics.jsonl.
    metrics["my_algorithm/rewarded"] = trajectories.filter((t) => t.reward > 0).length;
    return trajectories;
  }
}
