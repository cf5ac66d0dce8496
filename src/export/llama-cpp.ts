/**
 * The local engine's model as a GGUF file for llama.cpp (and what runs on it: Ollama, LM Studio,
 * node-llama-cpp): architecture `gpt2`, the tensors under the names llama.cpp's GPT-2 loader
 * reads, F32, and the byte-level vocabulary as a `gpt2` (byte-level BPE) tokenizer without merges,
 * so llama.cpp's token ids are the engine's.
 *
 * ggml lists a tensor's dimensions fastest-varying first and multiplies `W·x` with `W` stored
 * output-major (`{in, out}`: `out` rows of `in` values). The engine stores the attention and MLP
 * projections input-major, as GPT-2's `Conv1D` does, so those four are transposed (as llama.cpp's
 * own converter transposes GPT-2's `Conv1D` weights); embeddings, biases and gains are copied as
 * they are. The LM head is the token embedding (tied), which llama.cpp uses when `output.weight`
 * is absent.
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "../engine/config.js";
import { tensorViews } from "../engine/params.js";
import { BYTE_CHAT_TEMPLATE, specialIds, vocabularyTokens } from "./byte-vocab.js";
import { writeFiles } from "./write-files.js";
import { encodeGguf, type GgufTensor, type GgufValue } from "./gguf.js";
import { LAYER_NORM_EPSILON } from "./hugging-face.js";

/** The file {@link writeGguf} writes. */
export const GGUF_FILE = "model.gguf";

/** llama.cpp's token types (`llama_token_type`). */
const TOKEN_TYPE = { normal: 1, control: 3, unused: 5 } as const;

/** `general.file_type` of a model whose tensors are all F32 (`LLAMA_FTYPE_ALL_F32`). */
const FILE_TYPE_ALL_F32 = 0;

/** `m` (`rows × cols`, row-major) transposed. */
function transpose(m: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(m.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = m[r * cols + c]!;
  return out;
}

/** The weights as llama.cpp's GPT-2 tensors, dimensions fastest-varying first. */
export function ggufTensors(config: ResolvedModelConfig, weights: Float32Array): GgufTensor[] {
  const w = tensorViews(weights, config);
  const d = config.dModel;
  const out: GgufTensor[] = [
    { name: "token_embd.weight", dims: [d, config.vocabSize], data: w.wte },
    { name: "position_embd.weight", dims: [d, config.contextLength], data: w.wpe },
  ];
  w.blocks.forEach((b, l) => {
    const p = `blk.${l}`;
    out.push(
      { name: `${p}.attn_norm.weight`, dims: [d], data: b.ln1Gain },
      { name: `${p}.attn_norm.bias`, dims: [d], data: b.ln1Bias },
      { name: `${p}.attn_qkv.weight`, dims: [d, 3 * d], data: transpose(b.wqkv, d, 3 * d) },
      { name: `${p}.attn_qkv.bias`, dims: [3 * d], data: b.bqkv },
      { name: `${p}.attn_output.weight`, dims: [d, d], data: transpose(b.wo, d, d) },
      { name: `${p}.attn_output.bias`, dims: [d], data: b.bo },
      { name: `${p}.ffn_norm.weight`, dims: [d], data: b.ln2Gain },
      { name: `${p}.ffn_norm.bias`, dims: [d], data: b.ln2Bias },
      { name: `${p}.ffn_up.weight`, dims: [d, 4 * d], data: transpose(b.w1, d, 4 * d) },
      { name: `${p}.ffn_up.bias`, dims: [4 * d], data: b.b1 },
      { name: `${p}.ffn_down.weight`, dims: [4 * d, d], data: transpose(b.w2, 4 * d, d) },
      { name: `${p}.ffn_down.bias`, dims: [d], data: b.b2 },
    );
  });
  out.push(
    { name: "output_norm.weight", dims: [d], data: w.lnfGain },
    { name: "output_norm.bias", dims: [d], data: w.lnfBias },
  );
  return out;
}

/** The GGUF metadata: the architecture's hyperparameters, the tokenizer and the chat template. */
function ggufMetadata(
  config: ResolvedModelConfig,
  name: string,
  extra: Record<string, string>,
): Array<[string, GgufValue]> {
  const u32 = (value: number): GgufValue => ({ type: "uint32", value });
  const str = (value: string): GgufValue => ({ type: "string", value });
  const tokens = vocabularyTokens(config.vocabSize);
  const ids = specialIds();
  const special = new Set([ids.bos, ids.eos, ids.pad]);
  return [
    ["general.architecture", str("gpt2")],
    ["general.name", str(name)],
    ["general.file_type", u32(FILE_TYPE_ALL_F32)],
    ["gpt2.context_length", u32(config.contextLength)],
    ["gpt2.embedding_length", u32(config.dModel)],
    ["gpt2.feed_forward_length", u32(4 * config.dModel)],
    ["gpt2.block_count", u32(config.nLayers)],
    ["gpt2.attention.head_count", u32(config.nHeads)],
    ["gpt2.attention.layer_norm_epsilon", { type: "float32", value: LAYER_NORM_EPSILON }],
    ["tokenizer.ggml.model", str("gpt2")],
    // Without merges, a pre-tokenizer's split cannot change the ids (every byte is a token). The
    // name still matters to llama.cpp's detokenizer: `gpt-2` and `default` turn on its
    // clean_up_tokenization_spaces (" ." decodes as "."), `smollm` (GPT-2's split, digits apart) not.
    ["tokenizer.ggml.pre", str("smollm")],
    ["tokenizer.ggml.tokens", { type: "string[]", value: tokens }],
    [
      "tokenizer.ggml.token_type",
      {
        type: "int32[]",
        value: tokens.map((_, id) =>
          id < 256 ? TOKEN_TYPE.normal : special.has(id) ? TOKEN_TYPE.control : TOKEN_TYPE.unused,
        ),
      },
    ],
    // One token per byte: nothing to merge (llama.cpp requires the key, and accepts it empty).
    ["tokenizer.ggml.merges", { type: "string[]", value: [] }],
    ["tokenizer.ggml.bos_token_id", u32(ids.bos)],
    ["tokenizer.ggml.eos_token_id", u32(ids.eos)],
    ["tokenizer.ggml.padding_token_id", u32(ids.pad)],
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: true }],
    ["tokenizer.ggml.add_eos_token", { type: "bool", value: false }],
    ["tokenizer.chat_template", str(BYTE_CHAT_TEMPLATE)],
    ...Object.entries(extra).map(([key, value]): [string, GgufValue] => [key, str(value)]),
  ];
}

/** Writes the model as `dir/model.gguf` and returns its path. */
export async function writeGguf(
  dir: string,
  config: ResolvedModelConfig,
  weights: Float32Array,
  name: string,
  metadata: Record<string, string>,
): Promise<string> {
  const [path] = await writeFiles(dir, [
    [GGUF_FILE, encodeGguf(ggufMetadata(config, name, metadata), ggufTensors(config, weights))],
  ]);
  return path!;
}
