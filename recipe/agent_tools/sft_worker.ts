/**
 * The rollout worker of the agent_tools SFT warm start (`sft_local.ts`): each row becomes the
 * demonstration of one episode — question, the right tool call written as the gateway parses it,
 * the tool's result, the answer — rendered with the chat template, trained on the two assistant
 * turns only. No sampling.
 */
import { BaseRolloutWorker, Trajectory, type ChatMessage, type RolloutTask } from "nexrl";

/** A row of data/*.jsonl. */
interface ToolRow {
  question: string;
  answer: string;
  tool: string;
  arguments: Record<string, string>;
}

export class ToolsSftWorker extends BaseRolloutWorker {
  rollout(task: RolloutTask): Trajectory {
    const row = task.data as unknown as ToolRow;
    const call = `<tool_call>${JSON.stringify({ name: row.tool, arguments: row.arguments })}</tool_call>`;
    const episode: ChatMessage[] = [
      { role: "user", content: row.question },
      { role: "assistant", content: call },
      { role: "tool", content: row.answer },
      { role: "assistant", content: row.answer },
    ];
    const tokens = this.tokenizer.applyChatTemplate(episode);
    const lossMask = tokens.map(() => 0);
    for (const turn of [1, 3]) {
      const start = this.tokenizer.applyChatTemplate(episode.slice(0, turn), { addGenerationPrompt: true }).length;
      const end = this.tokenizer.applyChatTemplate(episode.slice(0, turn + 1)).length;
      for (let i = start; i < end; i++) lossMask[i] = 1;
    }
    return new Trajectory({ tokens, lossMask, reward: 1 });
  }
}
