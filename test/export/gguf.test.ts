import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalEngine } from "../../src/engine/index.js";
import { resolveModelConfig } from "../../src/engine/config.js";
import { tensorViews } from "../../src/engine/params.js";
import { readStateFile } from "../../src/engine/storage.js";
import { ByteTokenizer } from "../../src/engine/tokenizer.js";
import { exportModel } from "../../src/export/index.js";
import { pigLatinRun, tempDir } from "../support/runs.js";
import { cpuLlama, hasNodeLlamaCpp, importNodeLlamaCpp } from "./node-llama-cpp.js";
import { BYTE_CHAT_TEMPLATE } from "../../src/export/byte-vocab.js";
import { ggmlTableGelu, gpt2LogProbs, readSafetensors } from "./gpt2-reference.js";

interface GgufTensorInfo {
  dims: number[];
  type: number;
  offset: number;
}

/**
 * An independent GGUF reader (the layout of ggml's gguf.h): magic, version, counts, typed key-value
 * pairs, tensor infos, then the data section at the next multiple of 32; F32 data read as numbers.
 */
function readGguf(bytes: Uint8Array): {
  version: number;
  kv: Map<string, unknown>;
  kvTypes: Map<string, number>;
  tensors: Map<string, GgufTensorInfo & { data: Float32Array }>;
  dataStart: number;
} {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const u32 = (): number => ((at += 4), view.getUint32(at - 4, true));
  const u64 = (): number => ((at += 8), Number(view.getBigUint64(at - 8, true)));
  const str = (): string => {
    const n = u64();
    at += n;
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(at - n, at));
  };
  const scalar = (type: number): unknown => {
    switch (type) {
      case 4:
        return u32();
      case 5:
        return ((at += 4), view.getInt32(at - 4, true));
      case 6:
        return ((at += 4), view.getFloat32(at - 4, true));
      case 7:
        return ((at += 1), view.getUint8(at - 1) === 1);
      case 8:
        return str();
      default:
        throw new Error(`unexpected GGUF type ${type}`);
    }
  };
  expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe("GGUF");
  at = 4;
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  const kv = new Map<string, unknown>();
  const kvTypes = new Map<string, number>();
  for (let i = 0; i < nKv; i++) {
    const key = str();
    const type = u32();
    if (type === 9) {
      const itemType = u32();
      const n = u64();
      kv.set(
        key,
        Array.from({ length: n }, () => scalar(itemType)),
      );
      kvTypes.set(key, 100 + itemType);
    } else {
      kv.set(key, scalar(type));
      kvTypes.set(key, type);
    }
  }
  const infos: Array<[string, GgufTensorInfo]> = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const nDims = u32();
    const dims = Array.from({ length: nDims }, () => u64());
    const type = u32();
    infos.push([name, { dims, type, offset: u64() }]);
  }
  const dataStart = Math.ceil(at / 32) * 32;
  const tensors = new Map<string, GgufTensorInfo & { data: Float32Array }>();
  for (const [name, info] of infos) {
    const n = info.dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = view.getFloat32(dataStart + info.offset + 4 * i, true);
    tensors.set(name, { ...info, data });
  }
  return { version, kv, kvTypes, tensors, dataStart };
}

/** `m` (`rows × cols`, row-major) transposed, written out here rather than taken from src/. */
function transposed(m: Float32Array, rows: number, cols: number): number[] {
  const out: number[] = [];
  for (let c = 0; c < cols; c++) for (let r = 0; r < rows; r++) out.push(m[r * cols + c]!);
  return out;
}

describe("exportModel to GGUF", () => {
  it("writes a GGUF v3 with llama.cpp's GPT-2 keys, tokenizer and tensors (projections transposed, ne0 first, 32-byte aligned)", async () => {
    const runDir = await tempDir();
    await pigLatinRun(runDir, { steps: 2, saveFreq: 2, validateFreq: 0 });
    const out = await tempDir();
    const exported = await exportModel(runDir, { outDir: out, formats: ["gguf"] });
    expect(exported.files).toEqual([join(out, "model.gguf")]);
    const bytes = new Uint8Array(await readFile(join(out, "model.gguf")));
    const { version, kv, kvTypes, tensors, dataStart } = readGguf(bytes);
    expect(version).toBe(3);
    expect(
      Object.fromEntries(
        [...kv].filter(([k]) => !k.startsWith("tokenizer.ggml.tokens") && k !== "tokenizer.ggml.token_type"),
      ),
    ).toEqual({
      "general.architecture": "gpt2",
      "general.name": exported.name,
      "general.file_type": 0,
      "gpt2.context_length": 128,
      "gpt2.embedding_length": 32,
      "gpt2.feed_forward_length": 128,
      "gpt2.block_count": 2,
      "gpt2.attention.head_count": 2,
      "gpt2.attention.layer_norm_epsilon": Math.fround(1e-5),
      "tokenizer.ggml.model": "gpt2",
      "tokenizer.ggml.pre": "smollm",
      "tokenizer.ggml.merges": [],
      "tokenizer.ggml.bos_token_id": 256,
      "tokenizer.ggml.eos_token_id": 257,
      "tokenizer.ggml.padding_token_id": 258,
      "tokenizer.ggml.add_bos_token": true,
      "tokenizer.ggml.add_eos_token": false,
      "tokenizer.chat_template": BYTE_CHAT_TEMPLATE,
      "nexrl.run": exported.name,
      "nexrl.step": "2",
    });
    // The types llama.cpp's loader reads them as: u32 sizes and ids, f32 epsilon, bool flags, string and i32 arrays.
    expect(kvTypes.get("gpt2.block_count")).toBe(4);
    expect(kvTypes.get("tokenizer.ggml.eos_token_id")).toBe(4);
    expect(kvTypes.get("gpt2.attention.layer_norm_epsilon")).toBe(6);
    expect(kvTypes.get("tokenizer.ggml.add_bos_token")).toBe(7);
    expect(kvTypes.get("tokenizer.ggml.tokens")).toBe(108);
    expect(kvTypes.get("tokenizer.ggml.merges")).toBe(108);
    expect(kvTypes.get("tokenizer.ggml.token_type")).toBe(105);
    const tokens = kv.get("tokenizer.ggml.tokens") as string[];
    expect(tokens).toHaveLength(259);
    // GPT-2's byte characters: "A" is itself, space is U+0120, newline U+010A.
    expect([tokens[65], tokens[32], tokens[10], tokens[256], tokens[257], tokens[258]]).toEqual([
      "A",
      "Ġ",
      "Ċ",
      "<|bos|>",
      "<|eos|>",
      "<|pad|>",
    ]);
    expect(new Set(tokens.slice(0, 256)).size).toBe(256);
    const types = kv.get("tokenizer.ggml.token_type") as number[];
    expect(types.slice(0, 256).every((t) => t === 1)).toBe(true);
    expect(types.slice(256)).toEqual([3, 3, 3]);

    const names = [...tensors.keys()];
    expect(names).toHaveLength(2 + 2 * 12 + 2);
    expect(names.slice(0, 2)).toEqual(["token_embd.weight", "position_embd.weight"]);
    expect(names.slice(-2)).toEqual(["output_norm.weight", "output_norm.bias"]);
    expect(names).not.toContain("output.weight");
    let expectedOffset = 0;
    for (const t of tensors.values()) {
      expect(t.type).toBe(0);
      expect(t.offset).toBe(expectedOffset);
      expectedOffset += Math.ceil((4 * t.data.length) / 32) * 32;
    }
    expect(dataStart % 32).toBe(0);
    expect(bytes.length).toBe(dataStart + expectedOffset);

    const contents = await readStateFile(exported.source);
    const config = resolveModelConfig(contents.config, 259);
    const w = tensorViews(contents.weights, config);
    const b = w.blocks[1]!;
    const get = (name: string): { dims: number[]; data: number[] } => {
      const t = tensors.get(name)!;
      return { dims: t.dims, data: Array.from(t.data) };
    };
    expect(get("token_embd.weight")).toEqual({ dims: [32, 259], data: Array.from(w.wte) });
    expect(get("position_embd.weight")).toEqual({ dims: [32, 128], data: Array.from(w.wpe) });
    // ggml computes W·x with W stored {in, out}: out rows of in values; the engine's are in rows of out values.
    expect(get("blk.1.attn_qkv.weight")).toEqual({ dims: [32, 96], data: transposed(b.wqkv, 32, 96) });
    expect(get("blk.1.attn_output.weight")).toEqual({ dims: [32, 32], data: transposed(b.wo, 32, 32) });
    expect(get("blk.1.ffn_up.weight")).toEqual({ dims: [32, 128], data: transposed(b.w1, 32, 128) });
    expect(get("blk.1.ffn_down.weight")).toEqual({ dims: [128, 32], data: transposed(b.w2, 128, 32) });
    expect(get("blk.1.attn_qkv.bias")).toEqual({ dims: [96], data: Array.from(b.bqkv) });
    expect(get("blk.1.ffn_up.bias")).toEqual({ dims: [128], data: Array.from(b.b1) });
    expect(get("blk.1.attn_norm.weight").data).toEqual(Array.from(b.ln1Gain));
    expect(get("blk.1.ffn_norm.bias").data).toEqual(Array.from(b.ln2Bias));
    expect(get("output_norm.weight").data).toEqual(Array.from(w.lnfGain));
  }, 120_000);

  it.skipIf(!hasNodeLlamaCpp)(
    "loads in node-llama-cpp (llama.cpp, CPU, F32 KV cache) with the engine's token ids, chat template and next-token logprobs within 1e-3",
    async () => {
      const runDir = await tempDir();
      // Twenty steps, so the logprobs are a trained model's rather than near-uniform ones.
      await pigLatinRun(runDir, { steps: 20, saveFreq: 20, validateFreq: 0 });
      const out = await tempDir();
      const exported = await exportModel(runDir, { outDir: out });
      // The Hugging Face files of the same weights feed the double-precision reference below.
      const { tensors } = readSafetensors(new Uint8Array(await readFile(join(out, "model.safetensors"))));
      const cfg = JSON.parse(await readFile(join(out, "config.json"), "utf8")) as Record<string, number>;
      const bytes = new ByteTokenizer();
      const nodeLlamaCpp = await importNodeLlamaCpp();
      const llama = await cpuLlama(nodeLlamaCpp);
      const sampler = await LocalEngine.samplerFromSnapshot(exported.source, { threads: 1 });
      try {
        const model = await llama.loadModel({ modelPath: join(out, "model.gguf"), gpuLayers: 0 });
        expect(model.trainContextSize).toBe(128);
        expect(model.tokens).toMatchObject({ bos: 256, eos: 257 });
        for (const text of ["translate: banana", "héllo wörld ✓", " two  spaces\nand a line", "a . b , c ? 12345"]) {
          expect(model.tokenize(text)).toEqual(bytes.encode(text));
          expect(model.detokenize(bytes.encode(text))).toBe(text);
        }
        expect(model.tokenize("<|bos|>x<|eos|>", true)).toEqual([256, 120, 257]);
        // node-llama-cpp renders the GGUF's chat template (with its Jinja wrapper) into the engine's chat ids.
        expect(model.fileInfo.metadata).toMatchObject({ tokenizer: { chat_template: BYTE_CHAT_TEMPLATE } });
        const wrapper = nodeLlamaCpp.resolveChatWrapper(model);
        expect(wrapper.wrapperName).toBe("JinjaTemplate");
        const chat = wrapper.generateContextState({
          chatHistory: [
            { type: "user", text: "smile" },
            { type: "model", response: ["ilesmay"] },
            { type: "user", text: "pig" },
            { type: "model", response: [] },
          ],
        });
        expect(chat.contextText.tokenize(model.tokenizer)).toEqual(
          bytes.applyChatTemplate(
            [
              { role: "user", content: "smile" },
              { role: "assistant", content: "ilesmay" },
              { role: "user", content: "pig" },
            ],
            { addGenerationPrompt: true },
          ),
        );

        const context = await model.createContext({
          contextSize: 128,
          sequences: 1,
          threads: 1,
          flashAttention: false,
          experimentalKvCacheKeyType: "F32",
          experimentalKvCacheValueType: "F32",
        });
        const prompts = [
          bytes.applyChatTemplate([{ role: "user", content: "hello" }], { addGenerationPrompt: true }),
          bytes.encode("translate: banana", { addBos: true }),
          bytes.encode("héllo wörld ✓", { addBos: true }),
        ];
        let worst = 0;
        let worstTable = 0;
        let positions = 0;
        for (const tokens of prompts) {
          const sequence = context.getSequence();
          const results = await sequence.controlledEvaluate(
            tokens.map((token): [number, { generateNext: { logits: true } }] => [
              token,
              { generateNext: { logits: true } },
            ]),
          );
          const ours = sampler.computeLogprobs(tokens);
          const table = gpt2LogProbs(tensors, cfg, tokens, ggmlTableGelu);
          for (let i = 1; i < tokens.length; i++) {
            // llama.cpp's raw logits over the whole vocabulary, log-softmaxed here in double precision.
            const logits = results[i - 1]!.next.logits!;
            expect(logits.size).toBe(259);
            const values = [...logits.values()];
            const max = Math.max(...values);
            const logSumExp = max + Math.log(values.reduce((a, z) => a + Math.exp(z - max), 0));
            const theirs = logits.get(tokens[i]!)! - logSumExp;
            worst = Math.max(worst, Math.abs(ours[i]! - theirs));
            worstTable = Math.max(worstTable, Math.abs(table[i - 1]![tokens[i]!]! - theirs));
            positions++;
          }
          await sequence.dispose();
        }
        await context.dispose();
        console.log(
          `export-gguf: largest |logprob difference| between the engine and llama.cpp over ${positions} positions of ${prompts.length} prompts: ${worst.toExponential(2)}` +
            ` (llama.cpp against GPT-2 with its half-precision GELU table: ${worstTable.toExponential(2)})`,
        );
        expect(worst).toBeLessThan(1e-3);
        // What difference there is comes from llama.cpp's GELU: its CPU backend reads it from a table
        // indexed by the input rounded to half precision. With that GELU, a double-precision GPT-2
        // gives llama.cpp's logprobs to f32 accuracy. (llama.cpp's default F16 KV cache would add
        // about 1e-3 more, hence F32 above.)
        expect(worstTable).toBeLessThan(2e-5);
        await model.dispose();
      } finally {
        await sampler.close();
        await llama.dispose();
      }
    },
    180_000,
  );
});
