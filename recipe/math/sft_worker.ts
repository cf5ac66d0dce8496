/**
 * The rollout worker of the math SFT warm start (`sft_local.ts`): a supervised example from each
 * row, with the same chat-formatted prompt the GRPO stage samples from. No sampling.
 */
import { BaseRolloutWorker, Trajectory, type RolloutTask } from "nexrl";

export class MathSftWorker extends BaseRolloutWorker {
  rollout(task: RolloutTask): Trajectory {
    const prompt = this.tokenizer.applyChatTemplate([{ role: "user", content: String(task.prompt) }], {
      addGenerationPrompt: true,
    });
    const answer = [...this.tokenizer.encode(String(task.data.ground_truth)), this.tokenizer.eosId];
    return new Trajectory({
      tokens: [...prompt, ...answer],
      lossMask: [...prompt.map(() => 0), ...answer.map(() => 1)],
      reward: 1,
    });
  }
}
