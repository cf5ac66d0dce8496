/**
 * The "Custom RolloutWorker" of the Weaver fine-tuning guide, in TypeScript: complete the prompt,
 * extract the answer, reward an exact match. It sets no logprobs; trainers whose loss needs them
 * compute them with a forward pass (and say so once).
 */
import { BaseRolloutWorker, Trajectory, type RolloutTask } from "nexrl";

export class MyTaskWorker extends BaseRolloutWorker {
  async rollout(task: RolloutTask) {
    const prompt = String(task.data.prompt);
    const answer = String(task.data.answer ?? "");

    const completion = await this.inferenceClient.completion(prompt);
    const { promptTokens, responseTokens, response } = completion;

    const reward = this.extractAnswer(response) === answer ? 1.0 : 0.0;

    const trajectory = new Trajectory({
      tokens: [...promptTokens, ...responseTokens],
      lossMask: [...promptTokens.map(() => 0), ...responseTokens.map(() => 1)],
      reward,
      extraFields: { response, answer },
    });
    return this.putTrajectory(trajectory);
  }

  /** The last run of digits in the response. */
  private extractAnswer(response: string): string | undefined {
    return response.match(/\d+/g)?.at(-1);
  }
}
