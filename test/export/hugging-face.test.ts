import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalEngine } from "../../src/engine/index.js";
import { exportModel } from "../../src/export/index.js";
import { HfTokenizer } from "../../src/services/inference/tokenizers/hf-tokenizer.js";
import { ByteTokenizer } from "../../src/engine/tokenizer.js";
import { parseCommandLine } from "../../src/cli/args.js";
import { commandHelp } from "../../src/cli/help.js";
import { pigLatinRun, runNexrl, tempDir } from "../run-folder/helpers.js";
import { RunError, UsageError } from "../../src/errors.js";

interface Tensor {
  shape: number[];
  data: Float64Array;
}

/** An independent safetensors reader: the u64 header length, the JSON header, F32 data at its offsets. */
function readSafetensors(bytes: Uint8Array): { tensors: Map<string, Tensor>; metadata: unknown; headerLength: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const tensors = new Map<string, Tensor>();
  const base = 8 + headerLength;
  let expectedStart = 0;
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    expect(entry.dtype).toBe("F32");
    const [start, end] = entry.data_offsets;
    expect(start).toBe(expectedStart);
    expectedStart = end;
    const n = entry.shape.reduce((a, b) => a * b, 1);
    expect(end - start).toBe(4 * n);
    const data = new Float64Array(n);
    for (let i = 0; i < n; i++) data[i] = view.getFloat32(base + start + 4 * i, true);
    tensors.set(name, { shape: entry.shape, data });
  }
  expect(base + expectedStart).toBe(bytes.length);
  return { tensors, metadata: header.__metadata__, headerLength };
}

/** GPT-2's forward pass, in double precision, straight from the Hugging Face tensors and config. */
function gpt2LogProbs(t: Map<string, Tensor>, cfg: Record<string, number>, tokens: number[]): number[][] {
  const d = cfg.n_embd!;
  const H = cfg.n_head!;
  const dh = d / H;
  const eps = cfg.layer_norm_epsilon!;
  const get = (name: string): Float64Array => t.get(name)!.data;
  const layerNorm = (x: number[], g: Float64Array, b: Float64Array): number[] => {
    const mean = x.reduce((a, v) => a + v, 0) / x.length;
    const variance = x.reduce((a, v) => a + (v - mean) ** 2, 0) / x.length;
    return x.map((v, j) => ((v - mean) / Math.sqrt(variance + eps)) * g[j]! + b[j]!);
  };
  // Conv1D: y = x·W + b with W [in, out].
  const conv1d = (x: number[], w: Float64Array, b: Float64Array): number[] => {
    const out = Array.from(b);
    for (let i = 0; i < x.length; i++) for (let o = 0; o < out.length; o++) out[o]! += x[i]! * w[i * out.length + o]!;
    return out;
  };
  const gelu = (v: number): number => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
  const wte = get("wte.weight");
  const wpe = get("wpe.weight");
  let xs = tokens.map((tok, p) => Array.from({ length: d }, (_, j) => wte[tok * d + j]! + wpe[p * d + j]!));
  for (let l = 0; l < cfg.n_layer!; l++) {
    const h = (n: string): Float64Array => get(`h.${l}.${n}`);
    const qkv = xs.map((x) =>
      conv1d(layerNorm(x, h("ln_1.weight"), h("ln_1.bias")), h("attn.c_attn.weight"), h("attn.c_attn.bias")),
    );
    const attn = xs.map((_, i) => {
      const out = new Array<number>(d).fill(0);
      for (let head = 0; head < H; head++) {
        const q = qkv[i]!.slice(head * dh, (head + 1) * dh);
        const scores = qkv
          .slice(0, i + 1)
          .map((r) => q.reduce((a, v, c) => a + v * r[d + head * dh + c]!, 0) / Math.sqrt(dh));
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const sum = e.reduce((a, v) => a + v, 0);
        for (let j = 0; j <= i; j++)
          for (let c = 0; c < dh; c++) out[head * dh + c]! += (e[j]! / sum) * qkv[j]![2 * d + head * dh + c]!;
      }
      return out;
    });
    xs = xs.map((x, i) => conv1d(attn[i]!, h("attn.c_proj.weight"), h("attn.c_proj.bias")).map((v, j) => v + x[j]!));
    xs = xs.map((x) => {
      const hidden = conv1d(
        layerNorm(x, h("ln_2.weight"), h("ln_2.bias")),
        h("mlp.c_fc.weight"),
        h("mlp.c_fc.bias"),
      ).map(gelu);
      return conv1d(hidden, h("mlp.c_proj.weight"), h("mlp.c_proj.bias")).map((v, j) => v + x[j]!);
    });
  }
  const V = cfg.vocab_size!;
  return xs.map((x) => {
    const y = layerNorm(x, get("ln_f.weight"), get("ln_f.bias"));
    // Tied embeddings: the LM head is wte.
    const logits = Array.from({ length: V }, (_, v) => y.reduce((a, yj, j) => a + yj * wte[v * d + j]!, 0));
    const max = Math.max(...logits);
    const lse = max + Math.log(logits.reduce((a, z) => a + Math.exp(z - max), 0));
    return logits.map((z) => z - lse);
  });
}

describe("exportModel to Hugging Face's GPT-2 format", () => {
  it("writes tensors whose independent GPT-2 forward pass gives the engine's logprobs, and a tokenizer with its ids", async () => {
    const runDir = await tempDir();
    await pigLatinRun(runDir, { steps: 2, saveFreq: 2, validateFreq: 0 });
    const out = await tempDir();
    const exported = await exportModel(runDir, { outDir: out });
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
  it("parses RUN_DIR[:STEP] and --output, and refuses a second argument", () => {
    expect(parseCommandLine(["export", "runs/pig:4", "--output", "hf"])).toEqual({
      kind: "export",
      model: "runs/pig:4",
      output: "hf",
    });
    expect(parseCommandLine(["export", "--help"])).toEqual({ kind: "help", command: "export" });
    expect(() => parseCommandLine(["export"])).toThrow(UsageError);
    expect(() => parseCommandLine(["export", "a", "b"])).toThrow(UsageError);
    expect(commandHelp("export", "1.0.0")).toMatch(/^Usage:\n {2}nexrl export RUN_DIR\[:STEP\] \[--output DIR\]$/m);
  });

  it("writes the files into RUN_DIR/export/step_NNNNNN by default and prints them", async () => {
    const runDir = await tempDir();
    await pigLatinRun(runDir, { steps: 1, saveFreq: 1, validateFreq: 0 });
    const result = await runNexrl(["export", runDir], { cwd: runDir });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("export/step_000001/model.safetensors");
    const cfg = JSON.parse(await readFile(join(runDir, "export/step_000001/config.json"), "utf8")) as {
      n_embd: number;
    };
    expect(cfg.n_embd).toBe(32);
  }, 120_000);
});
