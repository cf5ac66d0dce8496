/**
 * Large inputs: a data file of 125 000 rows trains (it once overflowed the stack before the first
 * step), and the helpers that build token sequences take inputs of any length.
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { mergeCalls } from "../../src/agent/merge.js";
import { renderChat } from "../../src/agent/render.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import { modelInputTokens, type ModelInput } from "../../src/wire/wire.js";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCli, tempDir } from "./serve-helpers.js";

const root = path.resolve(import.meta.dirname, "../..");
const tokenizer = new ByteTokenizer();

describe("large inputs", () => {
  it("trains a step on a data file of 125 000 rows (child process of the built CLI)", async () => {
    const dir = await tempDir();
    const words = ["hello", "apple", "string", "quiet", "dog", "cat"];
    const lines = Array.from({ length: 125_000 }, (_, i) => {
      const phrase = `${words[i % 6]} ${words[(i * 7) % 6]}`;
      return JSON.stringify({ input: phrase, output: phrase.replace(/(\w)(\w*)/g, "$2-$1ay") });
    });
    await writeFile(path.join(dir, "train.jsonl"), `${lines.join("\n")}\n`);
    await writeFile(
      path.join(dir, "recipe.yaml"),
      `defaults: [${path.join(root, "recipe/pig_latin/local.yaml")}, _self_]
data:
  data_files: [train.jsonl]
trainer:
  total_train_steps: 1
validate:
  data:
    data_files: [train.jsonl]
  eval:
    validate_freq: 0
`,
    );
    const { code, stdout, stderr } = await runCli(
      ["-m", "training-service", "-c", "recipe.yaml", "--run-nexrl", "-o", "out"],
      { cwd: dir },
    );
    expect(stderr).not.toMatch(/Maximum call stack|unexpected error/);
    expect(code, stderr).toBe(EXIT_CODES.ok);
    expect(stdout).toContain("done after step 1");
  });

  it("builds token sequences of any length: chat templates, model inputs, the gateway's render and merge", () => {
    const long = "y".repeat(300_000);
    const ids = tokenizer.applyChatTemplate([{ role: "user", content: long }], { addGenerationPrompt: true });
    expect(ids.length).toBeGreaterThan(300_000);
    const input: ModelInput = {
      chunks: [
        { type: "encoded_text", tokens: ids },
        { type: "encoded_text", tokens: ids },
      ],
    };
    expect(modelInputTokens(input)).toHaveLength(2 * ids.length);
    const answered = [{ content: "ok", toolCalls: [], generated: "ok", tokens: tokenizer.encode("ok") }];
    const rendered = renderChat(
      tokenizer,
      [
        { role: "user", content: long },
        { role: "assistant", content: "ok" },
        { role: "user", content: long },
      ],
      answered,
      {},
    );
    expect(rendered.length).toBeGreaterThan(600_000);
    const call = (turn: number, promptTokens: number[]) => ({
      turn,
      endpoint: "completions" as const,
      promptTokens,
      completionTokens: [1, 2],
      logprobs: [-1, -1],
      finishReason: "stop" as const,
      text: "",
      toolCalls: [],
      reply: { content: "", toolCalls: [] },
      startedAt: 0,
      durationMs: 0,
    });
    const first = ids.slice(0, 200_000);
    const merged = mergeCalls([call(0, first), call(1, [...first, 1, 2, ...ids.slice(0, 150_000)])], tokenizer);
    expect(merged.sequences).toHaveLength(1);
    expect(merged.sequences[0]!.tokens).toHaveLength(350_004);
  });
});
