/**
 * The checks of the first data rows a run and `nexrl validate` make: the fields the built-in
 * worker reads (see `ROW_FORMATS`), and the length budget once the chat template wraps them.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { encodePrompt, type Tokenizer } from "../wire/tokenizer.js";
import type { DataLoader } from "../data/data-loader.js";
import { workerSettings } from "../recipe/settings.js";
import { rowFormatOf } from "../workers/row-formats.js";
import { readSftRow } from "../workers/sft-rows.js";
import { renderSftExample } from "../workers/sft.js";
import { isBuiltinAgent } from "../workers/registry.js";
import { InputError } from "../errors.js";

/** Rows of each data section checked up front. */
export const ROWS_CHECKED = 20;

/** Whether the recipe's worker wraps a text prompt in the chat template to sample or train. */
function wrapsTextInChat(config: RecipeConfig): boolean {
  const worker = config.rollout_worker;
  return (
    worker.type === "single_turn_math" ||
    worker.type === "preference" ||
    (worker.type === "agent" && isBuiltinAgent(worker))
  );
}

/**
 * Checks the first {@link ROWS_CHECKED} rows of the training and validation data against the row
 * fields of the recipe's built-in worker and, with a tokenizer, the length of each `sft` row after
 * the chat template against `rollout_worker.max_sequence_length`.
 * @returns notes: a length budget the chat template overruns.
 * @throws {@link "nexrl/errors".InputError | InputError} naming the section, the row and the field.
 */
export function checkFirstRows(
  config: RecipeConfig,
  loaders: { train: DataLoader; validation: DataLoader | undefined },
  tokenizer: Tokenizer | undefined,
): string[] {
  const format = rowFormatOf(config);
  const maxSequence = config.rollout_worker.max_sequence_length;
  const sections = [
    ["data", loaders.train, config.data.prompt_key],
    ["validate.data", loaders.validation, config.validate.data?.prompt_key ?? "prompt"],
  ] as const;
  for (const [section, loader, promptKey] of sections) {
    if (!loader || !format) continue;
    for (let i = 0; i < Math.min(ROWS_CHECKED, loader.size); i++) {
      const row = loader.groupOf({ index: i, epoch: 0, batchIndex: 0 }).tasks[0]!.data;
      const where = `row ${i + 1} of ${section}.data_files`;
      format.check(row, promptKey, where, config);
      if (config.rollout_worker.type !== "sft" || !tokenizer || maxSequence === undefined) continue;
      const example = readSftRow(row, promptKey, workerSettings(config).sft.trainOn, where);
      const length = renderSftExample(tokenizer, example, where).tokens.length;
      if (length > maxSequence)
        throw new InputError(
          `${where} is ${length} tokens after the chat template, more than rollout_worker.max_sequence_length (${maxSequence}); raise it or shorten the row`,
        );
    }
  }
  return budgetNotes(config, loaders.train, tokenizer);
}

/**
 * For a worker that wraps text prompts in the chat template: whether a prompt of
 * `max_prompt_length` tokens, the template's own tokens and `max_response_length` fit in
 * `max_sequence_length`, as the schema's check without the template cannot tell.
 */
function budgetNotes(config: RecipeConfig, train: DataLoader, tokenizer: Tokenizer | undefined): string[] {
  const worker = config.rollout_worker;
  const maxSequence = worker.max_sequence_length;
  if (!tokenizer || maxSequence === undefined || !wrapsTextInChat(config)) return [];
  const prompt = train.groupOf({ index: 0, epoch: 0, batchIndex: 0 }).tasks[0]!.prompt;
  if (typeof prompt !== "string") return []; // chat prompts are measured with their template already
  const overhead =
    tokenizer.applyChatTemplate([{ role: "user", content: "" }], { addGenerationPrompt: true }).length -
    encodePrompt(tokenizer, "").length;
  const promptLength = worker.max_prompt_length ?? config.data.max_prompt_length;
  const needed = promptLength + overhead + worker.max_response_length;
  if (needed <= maxSequence) return [];
  const fits = maxSequence - overhead - worker.max_response_length;
  return [
    `the chat template adds ${overhead} tokens to each text prompt: a prompt of max_prompt_length (${promptLength}) tokens and a response of max_response_length (${worker.max_response_length}) need ${needed}, more than rollout_worker.max_sequence_length (${maxSequence}), so such answers are cut; raise max_sequence_length to ${needed}${fits > 0 ? ` or lower max_prompt_length to ${fits}` : ""}`,
  ];
}
