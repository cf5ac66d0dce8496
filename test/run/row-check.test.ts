import { describe, expect, it } from "vitest";
import { checkRecipe } from "../../src/run/preflight.js";
import { ROW_FORMATS } from "../../src/workers/row-formats.js";
import { tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** `nexrl validate`'s checks of a recipe on the tiny model over `rows`, with `worker` settings. */
async function validate(rows: object[], worker: string, data = "prompt_key: prompt, max_prompt_length: 16") {
  const dir = await tempDir();
  await writeJsonl(`${dir}/train.jsonl`, rows);
  const recipe = await writeRecipe(
    dir,
    `data: {data_files: [train.jsonl], ${data}}\nrollout_worker: ${worker}\ntrainer: {type: remote_api_cross_entropy, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n`,
  );
  return checkRecipe(recipe, dir, {});
}

describe("nexrl validate checks the first rows and the length budget after the chat template", () => {
  it("refuses a single_turn_math row without ground_truth, naming the row and the field", async () => {
    const rows = [
      { prompt: "1+1", ground_truth: "2" },
      { prompt: "2+2", answer: "4" },
    ];
    await expect(
      validate(rows, "{type: single_turn_math, max_response_length: 8, max_sequence_length: 64}"),
    ).rejects.toThrow(
      /^row 2 of data.data_files has no "ground_truth" \(or "reward_model": \{"ground_truth": \.\.\.\}\)/,
    );
    await expect(
      validate(rows.slice(0, 1), "{type: single_turn_math, max_response_length: 8, max_sequence_length: 64}"),
    ).resolves.toEqual([]);
  });

  it("refuses sft rows of the wrong shape, and rows longer than max_sequence_length after the template", async () => {
    const worker = "{type: sft, max_response_length: 8, max_sequence_length: 40}";
    const data = "prompt_key: messages, max_prompt_length: 16";
    await expect(validate([{ messages: [{ role: "user", content: "hi" }] }], worker, data)).rejects.toThrow(
      /^row 1 of data.data_files has no assistant message to train on/,
    );
    const long = {
      messages: [
        { role: "user", content: "x".repeat(20) },
        { role: "assistant", content: "y".repeat(20) },
      ],
    };
    // BOS, `<|user|>\n` (9) + 20 + EOS, `<|assistant|>\n` (14) + 20 + EOS = 66 tokens.
    await expect(validate([long], worker, data)).rejects.toThrow(
      /^row 1 of data.data_files is 66 tokens after the chat template, more than rollout_worker.max_sequence_length \(40\)/,
    );
  });

  it("notes when max_prompt_length, the template's tokens and max_response_length overrun max_sequence_length", async () => {
    const notes = await validate(
      [{ prompt: "1+1", ground_truth: "2" }],
      "{type: single_turn_math, max_response_length: 8, max_sequence_length: 30}",
    );
    // The byte template wraps a text prompt in BOS, `<|user|>\n`, EOS and `<|assistant|>\n`: 25 tokens, BOS already counted.
    expect(notes).toEqual([
      "the chat template adds 24 tokens to each text prompt: a prompt of max_prompt_length (16) tokens and a response of max_response_length (8) need 48, more than rollout_worker.max_sequence_length (30), so such answers are cut; raise max_sequence_length to 48",
    ]);
  });

  it("documents the row fields of every built-in worker that reads rows by name", () => {
    expect(Object.keys(ROW_FORMATS).sort()).toEqual(["pig_latin", "preference", "sft", "simple", "single_turn_math"]);
    for (const format of Object.values(ROW_FORMATS)) {
      expect(format.fields.length).toBeGreaterThan(20);
      expect(() => JSON.parse(format.example.split(" or ")[0]!)).not.toThrow();
    }
  });
});
