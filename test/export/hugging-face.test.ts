import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalEngine } from "../../src/engine/index.js";
import { exportModel } from "../../src/export/index.js";
import { HfTokenizer } from "../../src/inference/tokenizers/hf-tokenizer.js";
import { ByteTokenizer } from "../../src/engine/tokenizer.js";
import { parseCommandLine } from "../../src/cli/args.js";
import { commandHelp } from "../../src/cli/help.js";
import { pigLatinRun, runNexrl, tempDir } from "../support/runs.js";
import { RunError, UsageError } from "../../src/errors.js";
import { gpt2LogProbs, readSafetensors } from "./gpt2-reference.js";

describe("exportModel to Hugging Face's GPT-2 format", () => {
  it("writes tensors whose independent GPT-2 forward pass gives the engine's logprobs, and a tokenizer with its ids", async () => {
    const runDir = await tempDir();
    await pigLatinRun(runDir, { steps: 2, saveFreq: 2, validateFreq: 0 });
    const out = await tempDir();
    const exported = await exportModel(runDir, { outDir: out, formats: ["hf"] });
    expect(exported.step).toBe(2);
    expect(exported.files.map((f) => f.slice(out.length + 1))).toEqual([
      "config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);

    const cfg = JSON.parse(await readFile(join(out, "config.json"), "utf8")) as Record<string, unknown>;
    expect(cfg).toMatchObject({
      model_type: "gpt2",
      architectures: ["GPT2LMHeadModel"],
      n_embd: 32,
      n_layer: 2,
      n_head: 2,
      n_positions: 128,
      n_ctx: 128,
      vocab_size: 259,
      layer_norm_epsilon: 1e-5,
      activation_function: "gelu_new",
      bos_token_id: 256,
      eos_token_id: 257,
      tie_word_embeddings: true,
    });
    const { tensors, metadata, headerLength } = readSafetensors(
      new Uint8Array(await readFile(join(out, "model.safetensors"))),
    );
    expect(headerLength % 8).toBe(0);
    expect(metadata).toMatchObject({ format: "pt" });
    expect(tensors.get("h.1.attn.c_attn.weight")!.shape).toEqual([32, 96]);
    expect(tensors.get("h.0.mlp.c_fc.weight")!.shape).toEqual([32, 128]);
    expect(tensors.get("h.0.mlp.c_proj.weight")!.shape).toEqual([128, 32]);
    expect(tensors.get("wte.weight")!.shape).toEqual([259, 32]);
    expect(tensors.get("wpe.weight")!.shape).toEqual([128, 32]);
    expect(tensors.size).toBe(2 + 2 * 12 + 2);

    const sampler = await LocalEngine.samplerFromSnapshot(exported.source, { threads: 1 });
    const bytes = new ByteTokenizer();
    const prompts = [
      bytes.applyChatTemplate([{ role: "user", content: "hello" }], { addGenerationPrompt: true }),
      bytes.encode("translate: banana", { addBos: true }),
      bytes.encode("héllo wörld ✓", { addBos: true }),
    ];
    let worst = 0;
    try {
      for (const tokens of prompts) {
        const ours = sampler.computeLogprobs(tokens);
        const theirs = gpt2LogProbs(tensors, cfg as Record<string, number>, tokens);
        for (let i = 1; i < tokens.length; i++)
          worst = Math.max(worst, Math.abs(ours[i]! - theirs[i - 1]![tokens[i]!]!));
      }
    } finally {
      await sampler.close();
    }
    expect(worst).toBeLessThan(1e-4);
    console.log(`export-hf: largest |logprob difference| over ${prompts.length} prompts: ${worst.toExponential(2)}`);

    // The tokenizer files, read by the Hugging Face tokenizers port nexrl uses, give the engine's ids.
    const hf = await HfTokenizer.fromFolder(out);
    for (const text of ["translate: banana", "héllo wörld ✓", " two  spaces\nand a line"])
      expect(hf.encode(text, { addBos: true })).toEqual(bytes.encode(text, { addBos: true }));
    const chat = [
      { role: "user" as const, content: "smile" },
      { role: "assistant" as const, content: "ilesmay" },
      { role: "user" as const, content: "pig" },
    ];
    expect(hf.applyChatTemplate(chat, { addGenerationPrompt: true })).toEqual(
      bytes.applyChatTemplate(chat, { addGenerationPrompt: true }),
    );
    expect(hf.decode(bytes.encode("ünïcode ✓"))).toBe("ünïcode ✓");
    expect([hf.bosId, hf.eosId]).toEqual([256, 257]);
  }, 120_000);

  it("refuses a step the run has no weights at", async () => {
    const runDir = await tempDir();
    await pigLatinRun(runDir, { steps: 1, saveFreq: 1, validateFreq: 0 });
    await expect(exportModel(`${runDir}:7`, { outDir: await tempDir() })).rejects.toThrow(RunError);
  }, 120_000);
});

describe("nexrl export", () => {
  it("parses RUN_DIR[:STEP], --format and --output, and refuses a second argument or another format", () => {
    expect(parseCommandLine(["export", "runs/pig:4", "--output", "hf"])).toEqual({
      kind: "export",
      model: "runs/pig:4",
      format: "both",
      output: "hf",
    });
    expect(parseCommandLine(["export", "runs/pig", "--format", "gguf"])).toEqual({
      kind: "export",
      model: "runs/pig",
      format: "gguf",
    });
    expect(() => parseCommandLine(["export", "runs/pig", "--format", "onnx"])).toThrow(
      /unknown --format "onnx"; use one of hf, gguf, both/,
    );
    expect(parseCommandLine(["export", "--help"])).toEqual({ kind: "help", command: "export" });
    expect(() => parseCommandLine(["export"])).toThrow(UsageError);
    expect(() => parseCommandLine(["export", "a", "b"])).toThrow(UsageError);
    expect(commandHelp("export", "1.0.0")).toMatch(
      /^Usage:\n {2}nexrl export RUN_DIR\[:STEP\] \[--format hf\|gguf\|both\] \[--output DIR\]$/m,
    );
  });

  it("writes both formats into RUN_DIR/export/step_NNNNNN by default and prints the files, or one with --format", async () => {
    const runDir = await tempDir();
    await pigLatinRun(runDir, { steps: 1, saveFreq: 1, validateFreq: 0 });
    const result = await runNexrl(["export", runDir], { cwd: runDir });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("export/step_000001/model.safetensors");
    expect(result.stdout).toContain("export/step_000001/model.gguf");
    const cfg = JSON.parse(await readFile(join(runDir, "export/step_000001/config.json"), "utf8")) as {
      n_embd: number;
    };
    expect(cfg.n_embd).toBe(32);
    const gguf = await runNexrl(["export", runDir, "--format", "gguf", "--output", "only-gguf"], { cwd: runDir });
    expect(gguf.code).toBe(0);
    expect(gguf.stdout.trim().split("\n").slice(1)).toEqual(["  only-gguf/model.gguf"]);
  }, 120_000);
});
