/**
 * The `pig_latin` rollout worker: supervised examples from labelled rows.
 * @module
 */
import { Trajectory } from "../contracts/trajectory.js";
import { rowNumber, type RolloutTask } from "../contracts/task.js";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { completionTrajectory } from "./completion-trajectory.js";
import { encodePrompt } from "../wire/tokenizer.js";
import { NexrlError } from "../errors.js";

/** Fraction of the words of `expected` that `answer` has at the same place. */
export function wordAccuracy(answer: string, expected: string): number {
  const got = answer.trim().split(/\s+/);
  const want = expected.trim().split(/\s+/);
  return want.filter((word, i) => got[i] === word).length / want.length;
}

/**
 * Builds a supervised trajectory from a row `{input, output}` without sampling: the prompt
 * `English: <input>\nPig Latin:` (with BOS) has loss mask 0, the answer ` <output>` and EOS have
 * loss mask 1, reward 1. Validation tasks are sampled greedily instead and score the fraction of
 * words translated right (word by word, in place), so `val/reward_mean` is the word accuracy and 1
 * means an exact answer.
 */
export class PigLatinRolloutWorker extends BaseRolloutWorker {
  /** The prompt of an input phrase. */
  static prompt(input: string): string {
    return `English: ${input}\nPig Latin:`;
  }

  /** One supervised trajectory, or a scored greedy sample for validation tasks. */
  async rollout(task: RolloutTask): Promise<Trajectory> {
    const input = String(task.prompt);
    const output = task.data.output;
    if (typeof output !== "string") {
      throw new NexrlError(
        `row ${rowNumber(task)} has no text field "output"; pig_latin rows look like {"input": "hello", "output": "ello-hay"}`,
      );
    }
    const prompt = PigLatinRolloutWorker.prompt(input);
    if (task.isVal) {
      const result = await this.inferenceClient.completion(prompt, { temperature: 0 });
      return completionTrajectory(result, wordAccuracy(result.response, output), { answer: output });
    }
    const promptTokens = encodePrompt(this.tokenizer, prompt);
    const answerTokens = [...this.tokenizer.encode(` ${output}`), this.tokenizer.eosId];
    const { tokens, lossMask, truncated } = this.truncate(
      [...promptTokens, ...answerTokens],
      [...promptTokens.map(() => 0), ...answerTokens.map(() => 1)],
    );
    if (truncated) {
      throw new NexrlError(
        `row ${rowNumber(task)} needs ${promptTokens.length + answerTokens.length} tokens, more than rollout_worker.max_sequence_length (${tokens.length}); raise it or shorten the row`,
      );
    }
    return new Trajectory({ tokens, lossMask, reward: 1, extraFields: { answer: output } });
  }
}
