import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { HfTokenizer } from "../../src/inference/index.js";
import { decodeTolerantly } from "../../src/wire/tokenizer.js";
import { additionRows, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { InputError } from "../../src/errors.js";

/**
 * A tokenizer with fewer ids than the tiny model has embedding rows (259), as Qwen3's 151,669 ids
 * against 151,936 rows: each letter, digit, space, `?` and `+` is its own token with its byte
 * value as id, and `<eos>` is 200. Every other id the model samples (0–31, 127–199, 201–258 and
 * the holes between) has no token.
 */
async function smallTokenizer(dir: string): Promise<string> {
  const vocab: Record<string, number> = {};
  for (const c of "abcdefghijklmnopqrstuvwxyzW0123456789 ?+") vocab[c] = c.charCodeAt(0);
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, "tokenizer.json"),
    JSON.stringify({
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: [
        {
          id: 200,
          content: "<eos>",
          single_word: false,
          lstrip: false,
          rstrip: false,
          normalized: false,
          special: true,
        },
      ],
      normalizer: null,
      pre_tokenizer: { type: "Split", pattern: { Regex: "." }, behavior: "Isolated", invert: false },
      post_processor: null,
      decoder: { type: "Fuse" },
      model: { type: "WordLevel", vocab, unk_token: "<eos>" },
    }),
  );
  await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<eos>" }));
  return dir;
}

const readJsonl = async (path: string) =>
  (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, any>);

describe("token ids beyond the tokenizer", () => {
  it("decode to nothing or a placeholder when asked, are reported, and stay an error for strict decoding", async () => {
    const tok = await HfTokenizer.fromFolder(await smallTokenizer(join(await tempDir(), "tok")));
    expect(tok.vocabSize).toBe(201);
    const ids = [104, 105, 250, 32, 150, 120];
    expect(() => tok.decode(ids)).toThrow(InputError);
    const seen: Array<[number, number]> = [];
    expect(tok.decode(ids, { unknownIds: "skip", onUnknownId: (id, at) => seen.push([id, at]) })).toBe("hi x");
    expect(seen).toEqual([
      [250, 2],
      [150, 4],
    ]);
    expect(tok.decode(ids, { unknownIds: "placeholder" })).toBe("hi<unk:250> <unk:150>x");
    expect(decodeTolerantly(tok, ids)).toEqual({ text: "hi x", unknownIds: 2 });
    const bytes = new ByteTokenizer();
    expect(() => bytes.decode([104, 300])).toThrow(InputError);
    expect(decodeTolerantly(bytes, [104, 300, -1, 105], "placeholder")).toEqual({
      text: "h<unk:300><unk:-1>i",
      unknownIds: 2,
    });
  });

  it("a run whose sampler returns them finishes, trains on them, and counts them per step and in validation", async () => {
    const dir = await tempDir();
    const tokenizer = await smallTokenizer(join(dir, "tok"));
    await writeJsonl(join(dir, "train.jsonl"), additionRows(4));
    await writeJsonl(join(dir, "val.jsonl"), additionRows(2));
    const validation = `validate:
  validate_before_train: true
  data: {data_files: [val.jsonl], rollout_repeat_n: 2}
  eval: {validate_freq: 1}
`;
    const recipe = await writeRecipe(dir, grpoRecipeYaml({ steps: 2, extra: validation }), [
      `rollout_worker.tokenizer=${tokenizer}`,
    ]);
    const result = await runRecipe(recipe, { outputDir: join(dir, "out"), samplesPerStep: 100 });
    expect(result.stopReason).toBe("completed");
    expect(result.steps).toBe(2);
    const samples = await readJsonl(join(dir, "out", "samples.jsonl"));
    for (const row of result.metrics.slice(1)) {
      const rows = samples.filter((s) => s.step === row.step && !s.validation);
      expect(rows).toHaveLength(row["rollout/num_trajectories"]!);
      const placeholders = rows.reduce((n, s) => n + (s.response.match(/<unk:\d+>/g)?.length ?? 0), 0);
      // The tiny model samples all 259 ids; the tokenizer knows 41 of them.
      expect(row["rollout/unknown_token_ids"]).toBeGreaterThan(0);
      expect(row["rollout/unknown_token_ids"]).toBe(placeholders);
      expect(row["train/num_tokens"]).toBeGreaterThan(0);
    }
    for (const row of result.metrics) {
      expect(row["val/num_samples"]).toBe(4);
      expect(row["val/failed"]).toBe(0);
      expect(row["val/unknown_token_ids"]).toBeGreaterThan(0);
      // The validation rollouts are kept too, their unknown ids shown as placeholders.
      const validation = samples.filter((s) => s.step === row.step && s.validation);
      expect(validation).toHaveLength(4);
      const placeholders = validation.reduce((n, s) => n + (s.response.match(/<unk:\d+>/g)?.length ?? 0), 0);
      expect(placeholders).toBe(row["val/unknown_token_ids"]);
    }
  });
});
