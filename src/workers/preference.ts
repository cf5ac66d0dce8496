/**
 * The `preference` rollout worker: chosen/rejected pairs from labelled rows.
 * @module
 */
import type { ChatMessage } from "../wire/tokenizer.js";
import { Trajectory } from "../contracts/trajectory.js";
import { rowNumber, type RolloutTask } from "../contracts/task.js";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { completionTrajectory } from "./completion-trajectory.js";
import { promptMessages } from "./messages.js";
import { NexrlError } from "../errors.js";

/**
 * Builds a preference pair from a row `{prompt, chosen, rejected}` without sampling: two
 * trajectories, the prompt (text or chat messages, through the model's chat template with the
 * assistant's turn opened, as `single_turn_math` samples) with loss mask 0 followed by the answer
 * and EOS with loss mask 1; `preference` is `chosen` (reward 1) or `rejected`
 * (reward 0). `remote_api_dpo` and `remote_api_reward_model` train on them. Validation tasks are
 * answered greedily instead, and score 1 when the answer is the row's `chosen` (trimmed), so
 * `val/reward_mean` is the fraction of prompts the policy answers the preferred way.
 */
export class PreferenceRolloutWorker extends BaseRolloutWorker {
  /** The pair of a training row, or a scored greedy answer for validation tasks. */
  async rollout(task: RolloutTask): Promise<Trajectory[]> {
    const where = `row ${rowNumber(task)}`;
    const { chosen, rejected } = task.data;
    if (typeof chosen !== "string" || typeof rejected !== "string") {
      throw new NexrlError(
        `${where} needs text fields "chosen" and "rejected"; preference rows look like {"prompt": "...", "chosen": "...", "rejected": "..."}`,
      );
    }
    const messages = promptMessages(task.prompt);
    if (task.isVal) {
      const result = await this.inferenceClient.chat(messages, { temperature: 0 });
      const answer = result.response.trim();
      return [
        completionTrajectory(result, answer === chosen.trim() ? 1 : 0, {
          chosen,
          rejected,
          matches_rejected: answer === rejected.trim(),
        }),
      ];
    }
    return [
      this.answerTrajectory(messages, chosen, "chosen", where),
      this.answerTrajectory(messages, rejected, "rejected", where),
    ];
  }

  private answerTrajectory(
    messages: ChatMessage[],
    answer: string,
    side: "chosen" | "rejected",
    where: string,
  ): Trajectory {
    const prompt = this.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });
    const response = [...this.tokenizer.encode(answer), this.tokenizer.eosId];
    const { tokens, lossMask, truncated } = this.truncate(
      [...prompt, ...response],
      [...prompt.map(() => 0), ...response.map(() => 1)],
    );
    if (truncated) {
      throw new NexrlError(
        `${where}: the ${side} answer needs ${prompt.length + response.length} tokens, more than rollout_worker.max_sequence_length (${tokens.length}); raise it or shorten the row`,
      );
    }
    return new Trajectory({
      tokens,
      lossMask,
      reward: side === "chosen" ? 1 : 0,
      preference: side,
      extraFields: { response: answer },
    });
  }
}
