/**
 * The local engine's model in Hugging Face's GPT-2 format: `config.json` (GPT2Config),
 * `model.safetensors` with GPT-2's tensor names, and a byte-level `tokenizer.json` whose ids are
 * the engine's.
 *
 * The engine's layout is GPT-2's: `wqkv` [d × 3d] (query, key, value side by side) and the MLP
 * and output projections are stored input-major, as GPT-2's `Conv1D` stores them, so every
 * tensor is copied as it is.
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "../engine/config.js";
import { tensorViews } from "../engine/params.js";
import { BYTE_CHAT_TEMPLATE, SPECIAL_TOKENS, specialIds, vocabularyTokens } from "./byte-vocab.js";
import { writeFiles } from "./write-files.js";
import { encodeSafetensors, type NamedTensor } from "../formats/safetensors.js";

/** The engine's layer-norm epsilon (`layers.ts`). */
export const LAYER_NORM_EPSILON = 1e-5;

/** The weights as GPT-2's named tensors, in `GPT2Model` order. */
export function gpt2Tensors(config: ResolvedModelConfig, weights: Float32Array): NamedTensor[] {
  const w = tensorViews(weights, config);
  const d = config.dModel;
  const out: NamedTensor[] = [
    { name: "wte.weight", shape: [config.vocabSize, d], data: w.wte },
    { name: "wpe.weight", shape: [config.contextLength, d], data: w.wpe },
  ];
  w.blocks.forEach((b, l) => {
    const p = `h.${l}`;
    out.push(
      { name: `${p}.ln_1.weight`, shape: [d], data: b.ln1Gain },
      { name: `${p}.ln_1.bias`, shape: [d], data: b.ln1Bias },
      { name: `${p}.attn.c_attn.weight`, shape: [d, 3 * d], data: b.wqkv },
      { name: `${p}.attn.c_attn.bias`, shape: [3 * d], data: b.bqkv },
      { name: `${p}.attn.c_proj.weight`, shape: [d, d], data: b.wo },
      { name: `${p}.attn.c_proj.bias`, shape: [d], data: b.bo },
      { name: `${p}.ln_2.weight`, shape: [d], data: b.ln2Gain },
      { name: `${p}.ln_2.bias`, shape: [d], data: b.ln2Bias },
      { name: `${p}.mlp.c_fc.weight`, shape: [d, 4 * d], data: b.w1 },
      { name: `${p}.mlp.c_fc.bias`, shape: [4 * d], data: b.b1 },
      { name: `${p}.mlp.c_proj.weight`, shape: [4 * d, d], data: b.w2 },
      { name: `${p}.mlp.c_proj.bias`, shape: [d], data: b.b2 },
    );
  });
  out.push({ name: "ln_f.weight", shape: [d], data: w.lnfGain }, { name: "ln_f.bias", shape: [d], data: w.lnfBias });
  return out;
}

/** `config.json`: a GPT2Config. */
function gpt2Config(config: ResolvedModelConfig): Record<string, unknown> {
  const ids = specialIds();
  return {
    model_type: "gpt2",
    architectures: ["GPT2LMHeadModel"],
    vocab_size: config.vocabSize,
    n_positions: config.contextLength,
    n_ctx: config.contextLength,
    n_embd: config.dModel,
    n_layer: config.nLayers,
    n_head: config.nHeads,
    n_inner: null,
    activation_function: "gelu_new",
    layer_norm_epsilon: LAYER_NORM_EPSILON,
    resid_pdrop: 0,
    embd_pdrop: 0,
    attn_pdrop: 0,
    scale_attn_weights: true,
    bos_token_id: ids.bos,
    eos_token_id: ids.eos,
    pad_token_id: ids.pad,
    tie_word_embeddings: true,
    torch_dtype: "float32",
  };
}

/** `tokenizer.json`: byte-level BPE without merges, so each byte is its own token, BOS added in front. */
function tokenizerJson(config: ResolvedModelConfig): Record<string, unknown> {
  const tokens = vocabularyTokens(config.vocabSize);
  const vocab = Object.fromEntries(tokens.map((t, id) => [t, id]));
  const added = tokens.slice(256).map((content, i) => ({
    id: 256 + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const bos = SPECIAL_TOKENS.bos;
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: bos, type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { [bos]: { id: bos, ids: [specialIds().bos], tokens: [bos] } },
    },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

/** `tokenizer_config.json`: the special tokens and the byte tokenizer's chat template. */
function tokenizerConfig(config: ResolvedModelConfig): Record<string, unknown> {
  return {
    tokenizer_class: "PreTrainedTokenizerFast",
    bos_token: SPECIAL_TOKENS.bos,
    eos_token: SPECIAL_TOKENS.eos,
    pad_token: SPECIAL_TOKENS.pad,
    add_bos_token: true,
    model_max_length: config.contextLength,
    chat_template: BYTE_CHAT_TEMPLATE,
  };
}

/** Writes the Hugging Face files of a model into `dir` and returns their paths. */
export async function writeHuggingFace(
  dir: string,
  config: ResolvedModelConfig,
  weights: Float32Array,
  metadata: Record<string, string>,
): Promise<string[]> {
  const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;
  return writeFiles(dir, [
    ["config.json", json(gpt2Config(config))],
    ["model.safetensors", encodeSafetensors(gpt2Tensors(config, weights), { format: "pt", ...metadata })],
    ["tokenizer.json", json(tokenizerJson(config))],
    ["tokenizer_config.json", json(tokenizerConfig(config))],
  ]);
}
