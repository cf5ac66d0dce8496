/**
 * The row fields each built-in rollout worker reads, documented once (the recipe reference lists
 * them) and checked on the first rows of the data by `nexrl validate` and at the start of a run, so
 * that a row the worker cannot use is refused before the first step rather than at it.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { workerSettings } from "../recipe/settings.js";
import { groundTruthOf } from "./math-answer.js";
import { isBuiltinAgent } from "./registry.js";
import { readSftRow } from "./sft-rows.js";
import { InputError } from "../errors.js";

/** What rows a built-in worker reads, and the check of one row. */
export interface RowFormat {
  /** The fields, as the recipe reference shows them (Markdown). */
  readonly fields: string;
  /** An example row (JSON). */
  readonly example: string;
  /**
   * Checks one row.
   * @param promptKey `data.prompt_key` of the row's section.
   * @param where how messages name the row.
   * @throws {@link "nexrl/errors".InputError | InputError} naming the row and the field.
   */
  check(row: Readonly<Record<string, unknown>>, promptKey: string, where: string, config: RecipeConfig): void;
}

const text = (row: Readonly<Record<string, unknown>>, field: string): boolean => typeof row[field] === "string";

/** The math rows: a ground truth, unless a reward model scores the answers. */
const mathFormat: RowFormat = {
  fields:
    "the prompt (`data.prompt_key`: text, or chat messages), `ground_truth` (or `reward_model.ground_truth`; not needed with `agent.math.judge_mode: reward_model`), optional `data_source` (validation metrics per source)",
  example: '{"prompt": "What is 2 + 3?", "ground_truth": "5"}',
  check(row, _promptKey, where, config) {
    if (config.rollout_worker.agent?.math.judge_mode === "reward_model") return;
    if (groundTruthOf(row) === undefined)
      throw new InputError(
        `${where} has no "ground_truth" (or "reward_model": {"ground_truth": ...}) to score answers against; ${this.fields.split(",")[0]} and ground_truth are needed, e.g. ${this.example}`,
      );
  },
};

/** Row fields of the built-in workers that read rows by name (not `agent`/`nexau` episodes of user code, nor `custom`). */
export const ROW_FORMATS: Readonly<Record<string, RowFormat>> = {
  sft: {
    fields:
      "OpenAI's fine-tuning format: the conversation in the prompt field (`data.prompt_key`, e.g. `messages`) as `system`/`developer`/`user`/`assistant`/`tool` messages with text `content` (assistant `tool_calls` with `content` null allowed), optional `tools` and per-assistant-message `weight` 0 or 1; or `prompt` and `completion` (text and text: trained as plain text; chat messages and a text or messages: through the chat template)",
    example:
      '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]} or {"prompt": "2+2=", "completion": "4"}',
    check(row, promptKey, where, config) {
      readSftRow(row, promptKey, workerSettings(config).sft.trainOn, where);
    },
  },
  pig_latin: {
    fields: "the phrase in the prompt field (`data.prompt_key`, text) and its translation in `output` (text)",
    example: '{"input": "hello world", "output": "ello-hay orld-way"}',
    check(row, promptKey, where) {
      if (!text(row, promptKey) || !text(row, "output"))
        throw new InputError(
          `${where} needs text fields "${promptKey}" and "output"; pig_latin rows look like ${this.example}`,
        );
    },
  },
  preference: {
    fields: "the prompt field (`data.prompt_key`: text, or chat messages), `chosen` and `rejected` (text)",
    example: '{"prompt": "Say hi", "chosen": "Hi!", "rejected": "No."}',
    check(row, _promptKey, where) {
      if (!text(row, "chosen") || !text(row, "rejected"))
        throw new InputError(
          `${where} needs text fields "chosen" and "rejected"; preference rows look like ${this.example}`,
        );
    },
  },
  single_turn_math: mathFormat,
  simple: {
    fields: "a text prompt (`data.prompt_key`) and `ground_truth` (compared with the last `<answer>…</answer>`)",
    example: '{"prompt": "2 + 3 = ? Answer in <answer></answer>.", "ground_truth": "5"}',
    check(row, promptKey, where) {
      if (!text(row, promptKey))
        throw new InputError(
          `${where}: the simple worker needs a text prompt in "${promptKey}"; rows look like ${this.example}`,
        );
      if (groundTruthOf(row) === undefined)
        throw new InputError(
          `${where} has no "ground_truth" to score the answer against; rows look like ${this.example}`,
        );
    },
  },
};

/** The row format of the recipe's worker, when it is a built-in one that reads rows by name. */
export function rowFormatOf(config: RecipeConfig): RowFormat | undefined {
  const worker = config.rollout_worker;
  if (worker.type === "agent" && isBuiltinAgent(worker)) return mathFormat;
  return ROW_FORMATS[worker.type];
}
