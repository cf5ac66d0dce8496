/**
 * `nexrl sample RUN_DIR[:STEP] [PROMPT]`: completions from a run's trained weights.
 * @module
 */
import { relative } from "node:path";
import { configValue } from "../run-folder/read.js";
import type { RunModel } from "../run-folder/model.js";
import type { SampledSequence, SamplingParams } from "../contracts/training.js";
import { modelInputFromTokens } from "../wire/wire.js";
import { EXIT_CODES } from "./args.js";
import type { SampleCommand } from "./after-run-args.js";
import type { CliIO } from "./io.js";
import { UsageError } from "../errors.js";

/** The prompts: the argument, else the non-empty lines of standard input. */
async function readPrompts(command: SampleCommand, io: CliIO): Promise<string[]> {
  if (command.prompt !== undefined) return [command.prompt];
  const stdin = io.stdin ?? process.stdin;
  if (stdin.isTTY) io.stderr.write("nexrl sample: reading prompts from standard input, one per line (Ctrl-D ends)\n");
  let text = "";
  for await (const chunk of stdin) text += typeof chunk === "string" ? chunk : chunk.toString("utf8");
  const prompts = text.split(/\r?\n/).filter((line) => line.trim() !== "");
  if (prompts.length === 0)
    throw new UsageError("no prompt: give one after RUN_DIR[:STEP], or write prompts to standard input, one per line");
  return prompts;
}

/** A number of the run's recipe, when it is one. */
function recipeNumber(config: Record<string, unknown>, key: string): number | undefined {
  const value = configValue(config, key);
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/**
 * Runs `nexrl sample`: opens the run's weights (see `openRunModel`), samples `-n` completions of
 * each prompt and prints them, with each token's logprob on request (`--json`: one object per
 * completion).
 */
export async function runSample(command: SampleCommand, io: CliIO): Promise<number> {
  const { openRunModel } = await import("../run-folder/model.js");
  const log = (line: string): void => void io.stderr.write(`nexrl sample: ${line}\n`);
  const model = await openRunModel(command.model, { cwd: io.cwd, env: io.env, log });
  try {
    const params: SamplingParams = {
      maxTokens: command.maxTokens ?? recipeNumber(model.config, "rollout_worker.max_response_length") ?? 256,
      temperature: command.temperature ?? recipeNumber(model.config, "rollout_worker.temperature") ?? 1,
      ...(command.seed !== undefined && { seed: command.seed }),
    };
    const rel = relative(io.cwd, model.source);
    const where = model.backend === "local" && rel !== "" && !rel.startsWith("..") ? rel : model.source;
    log(
      `${model.name}: ${model.backend} model ${model.baseModel}, weights of step ${model.step} (${where}); temperature ${params.temperature}, at most ${params.maxTokens} tokens`,
    );
    const prompts = await readPrompts(command, io);
    for (const [i, prompt] of prompts.entries()) {
      const tokens = command.chat
        ? model.tokenizer.applyChatTemplate([{ role: "user", content: prompt }], { addGenerationPrompt: true })
        : model.tokenizer.encode(prompt, { addBos: true });
      const { sequences } = await (
        await model.samplingClient.sample(modelInputFromTokens(tokens), command.n, params)
      ).result();
      for (const [k, sequence] of sequences.entries()) {
        if (command.json) io.stdout.write(`${JSON.stringify(jsonLine(model, prompt, sequence, command.logprobs))}\n`);
        else
          io.stdout.write(textBlock(model, prompts.length, i, prompt, sequences.length, k, sequence, command.logprobs));
      }
    }
    return EXIT_CODES.ok;
  } finally {
    await model.close();
  }
}

function jsonLine(model: RunModel, prompt: string, sequence: SampledSequence, logprobs: boolean) {
  return {
    model: model.name,
    prompt,
    text: model.tokenizer.decode(sequence.tokens),
    finish_reason: sequence.stopReason,
    tokens: sequence.tokens,
    ...(logprobs && { logprobs: sequence.logprobs }),
  };
}

/** One completion as text: a header line, the completion, and with `--logprobs` a token table. */
function textBlock(
  model: RunModel,
  promptCount: number,
  i: number,
  prompt: string,
  count: number,
  k: number,
  sequence: SampledSequence,
  logprobs: boolean,
): string {
  const lines: string[] = [];
  if (k === 0)
    lines.push(`=== prompt${promptCount > 1 ? ` ${i + 1} of ${promptCount}` : ""}: ${JSON.stringify(prompt)}`);
  lines.push(
    `--- completion${count > 1 ? ` ${k + 1} of ${count}` : ""} (${sequence.stopReason}, ${sequence.tokens.length} tokens)`,
    model.tokenizer.decode(sequence.tokens),
  );
  if (logprobs) {
    lines.push("    logprob  token");
    sequence.tokens.forEach((id, j) => {
      const text = model.tokenizer.decode([id]);
      lines.push(
        `${sequence.logprobs[j]!.toFixed(4).padStart(11)}  ${JSON.stringify(text)}${text === "" ? ` (id ${id})` : ""}`,
      );
    });
  }
  return `${lines.join("\n")}\n`;
}
