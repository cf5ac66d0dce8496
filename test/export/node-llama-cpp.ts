/**
 * node-llama-cpp (llama.cpp's Node binding, with its prebuilt CPU binary) from .cache/node-llama-cpp,
 * where scripts/ensure-node-llama-cpp.sh installs it; it is no dependency of nexrl. Typed here by
 * the little the GGUF test uses.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { root } from "../support/runs.js";

/** The pinned version scripts/ensure-node-llama-cpp.sh installs. */
const VERSION = "3.22.1";

const packageDir = join(root, ".cache/node-llama-cpp/node_modules/node-llama-cpp");

/** One position's output of `controlledEvaluate`: the raw next-token logits, by token id. */
interface EvaluateOutput {
  next: { logits?: Map<number, number> };
}

/** A context sequence: the tokens evaluated so far. */
export interface LlamaSequence {
  controlledEvaluate(
    input: Array<number | [number, { generateNext: { logits: true } }]>,
  ): Promise<Array<EvaluateOutput | undefined>>;
  dispose(): Promise<void>;
}

/** A context: KV cache and sequences. */
export interface LlamaContext {
  getSequence(): LlamaSequence;
  dispose(): Promise<void>;
}

/** A chat history item, as node-llama-cpp's chat wrappers take it. */
type ChatHistoryItem = { type: "user"; text: string } | { type: "model"; response: string[] };

/** A chat wrapper: how node-llama-cpp lays out a conversation for a model. */
export interface ChatWrapper {
  readonly wrapperName: string;
  generateContextState(options: { chatHistory: ChatHistoryItem[] }): {
    contextText: { tokenize(tokenizer: LlamaModel["tokenizer"]): number[] };
  };
}

/** A loaded model. */
export interface LlamaModel {
  readonly tokenizer: unknown;
  tokenize(text: string, specialTokens?: boolean): number[];
  detokenize(tokens: readonly number[], specialTokens?: boolean): string;
  readonly tokens: { bos: number | null; eos: number | null };
  readonly trainContextSize: number;
  readonly fileInfo: { metadata: Record<string, unknown> };
  createContext(options: {
    contextSize: number;
    sequences: number;
    threads: number;
    flashAttention: boolean;
    experimentalKvCacheKeyType: "F32";
    experimentalKvCacheValueType: "F32";
  }): Promise<LlamaContext>;
  dispose(): Promise<void>;
}

/** The binding. */
export interface Llama {
  loadModel(options: { modelPath: string; gpuLayers: 0 }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

/** The part of node-llama-cpp's exports the test uses. */
export interface NodeLlamaCpp {
  /** The chat wrapper node-llama-cpp picks for a model (from its GGUF's chat template). */
  resolveChatWrapper(model: LlamaModel): ChatWrapper;
  getLlama(options: {
    gpu: false;
    build: "never";
    usePrebuiltBinaries: true;
    skipDownload: true;
    progressLogs: false;
    logLevel: "error";
  }): Promise<Llama>;
}

/** Whether the pinned node-llama-cpp is installed; the tests that need it skip, with a warning, when not. */
export const hasNodeLlamaCpp =
  existsSync(join(packageDir, "package.json")) &&
  existsSync(join(packageDir, "../@node-llama-cpp/linux-x64/package.json"));
if (!hasNodeLlamaCpp)
  console.warn(
    `the GGUF loading test is skipped: no node-llama-cpp@${VERSION} with its Linux x64 binary in .cache/node-llama-cpp. Install it with scripts/ensure-node-llama-cpp.sh.`,
  );

/** The installed node-llama-cpp. */
export async function importNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  return (await import(pathToFileURL(join(packageDir, "dist/index.js")).href)) as NodeLlamaCpp;
}

/** llama.cpp on the CPU (its prebuilt binary; nothing is built or downloaded), logging errors only. */
export function cpuLlama(module: NodeLlamaCpp): Promise<Llama> {
  return module.getLlama({
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    logLevel: "error",
  });
}
