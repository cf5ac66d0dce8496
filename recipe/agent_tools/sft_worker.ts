/**
 * The rollout worker of the agent_tools SFT warm start (`sft_local.ts`): each row becomes the
 * demonstration of one episode, rendered with the chat template and trained on the assistant
 * turns only. No sampling.
 *
 * The demonstrations are those of an agent with a bad habit: three times in four it
 * answers at once with a guessed number of the right length, and only for the others does it
 * call the right tool (written as the gateway parses it) and answer with the tool's result. The
 * warm start therefore teaches the tool-call format and the copying of the result, but leaves a
 * policy that mostly guesses, which the evaluator never rewards: GRPO has to find out that calling
 * the tool pays.
 */
import { BaseRolloutWorker, Trajectory, type ChatMessage, type RolloutTask } from "nexrl";

/** A row of data/*.jsonl. */
interface ToolRow {
  question: string;
  answer: string;
  tool: string;
  arguments: Record<string, string>;
}

/** Of every `GUESS_EVERY` demonstrations, all but one are guesses (3 in 4). */
const GUESS_EVERY = 4;

/** A 32-bit hash of `text` (FNV-1a), to pick a guess. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** The `n`-th guess at `row`: a wrong number with as many digits as the answer. */
function guessAt(row: ToolRow, n: number): string {
  const low = 10 ** (row.answer.length - 1);
  const guess = String(low + (hash(`${row.question}#${n}`) % (9 * low)));
  return guess === row.answer ? String(low + ((Number(guess) - low + 1) % (9 * low))) : guess;
}

export class ToolsSftWorker extends BaseRolloutWorker {
  /** Demonstrations made so far: every `GUESS_EVERY`-th one calls the tool, whichever row it is. */
  private made = 0;

  rollout(task: RolloutTask): Trajectory {
    const row = task.data as unknown as ToolRow;
    const n = this.made++;
    const guess = n % GUESS_EVERY === 0 ? undefined : guessAt(row, n);
    const call = `<tool_call>${JSON.stringify({ name: row.tool, arguments: row.arguments })}</tool_call>`;
    const episode: ChatMessage[] =
      guess === undefined
        ? [
            { role: "user", content: row.question },
            { role: "assistant", content: call },
            { role: "tool", content: row.answer },
            { role: "assistant", content: row.answer },
          ]
        : [
            { role: "user", content: row.question },
            { role: "assistant", content: guess },
          ];
    const tokens = this.tokenizer.applyChatTemplate(episode);
    const lossMask = tokens.map(() => 0);
    for (let turn = 1; turn < episode.length; turn += 2) {
      const start = this.tokenizer.applyChatTemplate(episode.slice(0, turn), { addGenerationPrompt: true }).length;
      const end = this.tokenizer.applyChatTemplate(episode.slice(0, turn + 1)).length;
      for (let i = start; i < end; i++) lossMask[i] = 1;
    }
    return new Trajectory({ tokens, lossMask, reward: 1 });
  }
}
