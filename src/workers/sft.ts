/**
 * The `sft` rollout worker: supervised fine-tuning on conversation files, no code needed.
 * @module
 */
import { templateRendersToolCalls, withToolCallsInText } from "../inference/chat-formats/tool-calls-in-text.js";
import { Trajectory } from "../contracts/trajectory.js";
import { rowNumber, type RolloutTask } from "../contracts/task.js";
import { encodePrompt, type ChatMessage, type ChatTemplateOptions, type Tokenizer } from "../wire/tokenizer.js";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { completionTrajectory } from "./completion-trajectory.js";
import { readSftRow, type ChatExample, type SftExample } from "./sft-rows.js";
import { VALIDATION_TARGET, type ValidationTarget } from "../rollouts/validation-nll.js";
import { InputError } from "../errors.js";

/** The tokens of an example, the loss mask over what is trained, and where the last trained span starts. */
export interface RenderedExample {
  /** The whole sequence. */
  tokens: number[];
  /** 1 on the trained tokens: each trained assistant message through its end-of-turn token. */
  lossMask: number[];
  /** Index of the first token of the last trained span (the prompt a validation sample continues ends there). */
  lastStart: number;
  /** For chat examples: the messages as rendered (tool calls written into the text when the template ignores them). */
  messages?: ChatMessage[];
  /** Index of the last trained message, for chat examples. */
  lastTrained?: number;
}

const isPrefix = (prefix: readonly number[], of: readonly number[]): boolean =>
  prefix.length <= of.length && prefix.every((t, i) => of[i] === t);

/** The tokens of a text example: the prompt as `completion()` encodes it (with BOS), the completion and EOS trained. */
function renderText(tokenizer: Tokenizer, prompt: string, completion: string): RenderedExample {
  const head = encodePrompt(tokenizer, prompt);
  const answer = [...tokenizer.encode(completion), tokenizer.eosId];
  return {
    tokens: [...head, ...answer],
    lossMask: [...head.map(() => 0), ...answer.map(() => 1)],
    lastStart: head.length,
  };
}

/**
 * The tokens of a chat example through the model's chat template, and the loss mask of its trained
 * assistant messages. Message `k` starts where the first `k` messages end with the assistant's turn
 * opened (`addGenerationPrompt`: what a sampler would be given) and ends after its end-of-turn
 * token (the tokenizer's EOS): the end of turn is trained (the model learns to stop), what the
 * template writes after it is not. When the template renders the first `k + 1` messages as the
 * start of the whole conversation, the message ends at the last EOS within them (or with them,
 * when they hold none); when it does not (Qwen3 writes an empty thinking block into the last
 * assistant message only), at the first EOS after its start.
 * @throws {@link "nexrl/errors".InputError | InputError} when the template renders the messages before an answer differently
 *   once the conversation goes on (so the answer's tokens cannot be told apart), or ignores the
 *   row's `tools`.
 */
function renderChat(tokenizer: Tokenizer, example: ChatExample, where: string): RenderedExample {
  const rendersToolCalls = templateRendersToolCalls(tokenizer);
  const messages = example.messages.map((message) => withToolCallsInText(message, rendersToolCalls));
  const options: ChatTemplateOptions = example.tools ? { tools: example.tools } : {};
  const tokens = tokenizer.applyChatTemplate(messages, options);
  const withoutTools = example.tools ? tokenizer.applyChatTemplate(messages) : undefined;
  if (withoutTools && withoutTools.length === tokens.length && isPrefix(withoutTools, tokens)) {
    throw new InputError(
      `${where}: the chat template of this model does not describe "tools" (it renders the conversation the same without them); remove "tools" from the rows or train a model whose template uses them`,
    );
  }
  const lossMask = new Array<number>(tokens.length).fill(0);
  let lastStart = 0;
  let lastTrained = 0;
  example.trained.forEach((trained, k) => {
    if (!trained) return;
    const before = tokenizer.applyChatTemplate(messages.slice(0, k), { ...options, addGenerationPrompt: true });
    const through = tokenizer.applyChatTemplate(messages.slice(0, k + 1), options);
    let end = -1;
    if (isPrefix(before, tokens) && isPrefix(through, tokens)) {
      const eos = through.lastIndexOf(tokenizer.eosId, through.length - 1);
      end = eos >= before.length ? eos + 1 : through.length;
    } else if (isPrefix(before, tokens)) {
      const eos = tokens.indexOf(tokenizer.eosId, before.length);
      end = eos < 0 ? -1 : eos + 1;
    }
    if (end <= before.length) {
      throw new InputError(
        `${where}: the chat template renders the messages before messages[${k}] (assistant) differently once the conversation goes on, or ends that answer without the tokenizer's EOS, so its tokens cannot be told apart from the rest; train on the last assistant message only (rollout_worker.sft.train_on: last_assistant_message, or weight 0 on earlier ones)`,
      );
    }
    lossMask.fill(1, before.length, end);
    lastStart = before.length;
    lastTrained = k;
  });
  return { tokens, lossMask, lastStart, messages, lastTrained };
}

/**
 * The tokens and loss mask the `sft` worker trains on for `example` (see {@link SftRolloutWorker}).
 * @param where how messages name the row.
 * @throws {@link "nexrl/errors".InputError | InputError} as the chat template rendering requires.
 */
export function renderSftExample(tokenizer: Tokenizer, example: SftExample, where: string): RenderedExample {
  return example.kind === "text"
    ? renderText(tokenizer, example.prompt, example.completion)
    : renderChat(tokenizer, example, where);
}

/** The field of `task.data` the task's prompt came from (`data.prompt_key`), for messages. */
function promptKeyOf(task: RolloutTask): string {
  return Object.keys(task.data).find((key) => task.data[key] === task.prompt) ?? "messages";
}

/**
 * Supervised fine-tuning from rows, without sampling and without code. Rows are in OpenAI's
 * fine-tuning format, `{"messages": [...], "tools": [...]}` (system, user, assistant and tool
 * messages; assistant `tool_calls`; an optional `weight` 0 or 1 per assistant message), or
 * `{"prompt": ..., "completion": ...}` (see `readSftRow` for every form; `data.prompt_key` names
 * the field of the messages or the prompt). A conversation is rendered with the model's chat
 * template (`tokenizer.applyChatTemplate`, with the row's `tools`); the trained assistant messages
 * — all of them, or the last, by `rollout_worker.sft.train_on`, unless a `weight` says otherwise —
 * have loss mask 1 through their end-of-turn token, everything else 0. A text prompt and completion
 * are trained as plain text: the prompt with BOS (as `inferenceClient.completion()` encodes a text
 * prompt), then the completion and EOS trained. Reward 1.
 *
 * Validation rows are answered greedily from the conversation up to their last trained message
 * (or from the text prompt), with the answer as target: `val/reward_mean` is the fraction of exact
 * answers, and the trajectory carries the row's own tokens as its validation target, so that the
 * run reports `val/nll`, the negative log-likelihood per target token.
 */
export class SftRolloutWorker extends BaseRolloutWorker {
  /** The example's trajectory, or for a validation task a greedy answer with the example as its target. */
  async rollout(task: RolloutTask): Promise<Trajectory> {
    const where = `row ${rowNumber(task)}`;
    const example = readSftRow(
      { ...task.data, [promptKeyOf(task)]: task.prompt },
      promptKeyOf(task),
      this.settings.sft.trainOn,
      where,
    );
    const rendered = renderSftExample(this.tokenizer, example, where);
    const { tokens, lossMask } = rendered;
    const max = this.settings.maxSequenceLength;
    if (max !== undefined && tokens.length > max)
      throw new InputError(
        `${where} needs ${tokens.length} tokens after the chat template, more than rollout_worker.max_sequence_length (${max}); raise it or shorten the row`,
      );
    if (!task.isVal) return new Trajectory({ tokens, lossMask, reward: 1 });
    const target: ValidationTarget = { tokens, loss_mask: lossMask };
    if (example.kind === "text") {
      const result = await this.inferenceClient.completion(example.prompt, { temperature: 0 });
      return completionTrajectory(result, exact(result.response, example.completion), {
        answer: example.completion,
        [VALIDATION_TARGET]: target,
      });
    }
    const k = rendered.lastTrained!;
    const messages = rendered.messages!;
    const result = await this.inferenceClient.chat(messages.slice(0, k), {
      temperature: 0,
      ...(example.tools && { tools: example.tools }),
    });
    const answer = messages[k]!.content;
    return completionTrajectory(result, exact(result.response, answer), {
      answer,
      [VALIDATION_TARGET]: target,
    });
  }
}

/** 1 when the answer is the target (both trimmed), else 0. */
function exact(answer: string, target: string): number {
  return answer.trim() === target.trim() ? 1 : 0;
}
