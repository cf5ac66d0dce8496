/**
 * The rollout worker of the overlap row: one completion per task, rewarded 1 on even runs and 0
 * on odd ones, so that every GRPO group has a signal and every step trains.
 */
import { BaseRolloutWorker } from "../../dist/contracts/rollout-worker.js";
import { completionTrajectory } from "../../dist/workers/completion-trajectory.js";
import type { RolloutTask } from "../../dist/contracts/task.js";
import type { Trajectory } from "../../dist/contracts/trajectory.js";

export class AlternatingRewardWorker extends BaseRolloutWorker {
  async rollout(task: RolloutTask): Promise<Trajectory> {
    return completionTrajectory(
      await this.inferenceClient.completion(String(task.prompt)),
      task.runId % 2 === 0 ? 1 : 0,
    );
  }
}
