/**
 * Wire types of the training-service protocols (Tinker JSON generation, reused by Weaver with
 * small differences handled in its client). Field names are snake_case because these objects go
 * on the wire as they are.
 *
 * @module
 */
import { appendAll } from "./arrays.js";
import { InputError } from "../errors.js";

/** Element type of a {@link TensorData}. The Tinker public wire knows only these two. */
export type TensorDtype = "int64" | "float32";

/**
 * A tensor on the wire: `data` is flattened row-major; `shape` omitted means 1-D. Tinker's wire
 * type, spelled as the protocol does (snake_case).
 */
export interface TensorData {
  /** The values, flattened row-major. */
  data: number[];
  /** Element type. */
  dtype: TensorDtype;
  /** Shape; omitted means `[data.length]`. */
  shape?: number[];
  /** CSR row offsets; set together with `sparse_col_indices`, and then `shape` is required. */
  sparse_crow_indices?: number[];
  /** CSR column indices; set together with `sparse_crow_indices`. */
  sparse_col_indices?: number[];
}

/** A run of token ids inside a {@link ModelInput}. */
export interface EncodedTextChunk {
  /** Discriminator. */
  type: "encoded_text";
  /** Token ids. */
  tokens: number[];
}

/** An inline image inside a {@link ModelInput} (Tinker's wire type, spelled as on the wire). */
export interface ImageChunk {
  /** Discriminator. */
  type: "image";
  /** Base64-encoded image bytes. */
  data: string;
  /** Image encoding. */
  format: "png" | "jpeg";
  /** Number of model positions the image occupies, when known. */
  expected_tokens?: number;
}

/** An image referenced by location inside a {@link ModelInput} (Tinker's wire type, spelled as on the wire). */
export interface ImageAssetPointerChunk {
  /** Discriminator. */
  type: "image_asset_pointer";
  /** Where the server finds the image. */
  location: string;
  /** Image encoding. */
  format: "png" | "jpeg";
  /** Number of model positions the image occupies, when known. */
  expected_tokens?: number;
}

/** One chunk of a {@link ModelInput}. */
export type ModelInputChunk = EncodedTextChunk | ImageChunk | ImageAssetPointerChunk;

/** The input sequence of a datum or a sampling request, as a list of chunks (Tinker's wire type). */
export interface ModelInput {
  /** The chunks, in order. */
  chunks: ModelInputChunk[];
}

/**
 * One training example: the input sequence and the named tensors its loss function reads.
 * Tinker's wire type: it goes on the wire as it is, so its keys are the protocol's (snake_case).
 */
export interface Datum {
  /** The input positions. */
  model_input: ModelInput;
  /** Loss inputs by name (`target_tokens`, `weights`, `logprobs`, `advantages`, …). */
  loss_fn_inputs: Record<string, TensorData>;
}

/**
 * Optimizer hyper-parameters of one `optim_step` (AdamW with decoupled weight decay). camelCase
 * like the rest of the TypeScript surface: the clients send it as the protocols' snake_case
 * `adam_params` (`learning_rate`, `weight_decay`, `grad_clip_norm`).
 */
export interface AdamParams {
  /** Step size. */
  learningRate: number;
  /** First-moment decay. */
  beta1: number;
  /** Second-moment decay. */
  beta2: number;
  /** Denominator epsilon. */
  eps: number;
  /** Decoupled weight decay (AdamW). */
  weightDecay: number;
  /** Global-norm gradient clipping; 0 disables it. */
  gradClipNorm: number;
}

/**
 * `adam_params` as the Tinker and Weaver protocols spell it (snake_case, as on the wire; the
 * recipe's hyper-parameters spell them the same way, and the recipe reference shows these
 * descriptions). {@link AdamParams} is the same in camelCase.
 */
export interface AdamParamsWire {
  /** AdamW step size. */
  learning_rate: number;
  /** AdamW first-moment decay. */
  beta1: number;
  /** AdamW second-moment decay. */
  beta2: number;
  /** AdamW epsilon. */
  eps: number;
  /** Decoupled weight decay. */
  weight_decay: number;
  /** Global-norm gradient clipping; 0 disables it. */
  grad_clip_norm: number;
}

/** Tinker's defaults for {@link AdamParams}. */
export const DEFAULT_ADAM_PARAMS: Readonly<AdamParams> = Object.freeze({
  learningRate: 1e-4,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-12,
  weightDecay: 0,
  gradClipNorm: 0,
});

/**
 * Builds {@link AdamParams} from a partial object, filling Tinker's defaults.
 * @throws {@link "nexrl/errors".InputError | InputError} when a value is not a finite number or out of range.
 */
export function adamParams(params: Partial<AdamParams> = {}): AdamParams {
  const out: AdamParams = { ...DEFAULT_ADAM_PARAMS, ...params };
  for (const [key, value] of Object.entries(out)) {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new InputError(`AdamParams.${key} must be a finite number, got ${String(value)}`);
    }
  }
  if (out.learningRate < 0) throw new InputError(`AdamParams.learningRate must be >= 0, got ${out.learningRate}`);
  for (const key of ["beta1", "beta2"] as const) {
    if (out[key] < 0 || out[key] >= 1) throw new InputError(`AdamParams.${key} must be in [0, 1), got ${out[key]}`);
  }
  if (out.eps <= 0) throw new InputError(`AdamParams.eps must be > 0, got ${out.eps}`);
  if (out.weightDecay < 0) throw new InputError(`AdamParams.weightDecay must be >= 0, got ${out.weightDecay}`);
  if (out.gradClipNorm < 0)
    throw new InputError(`AdamParams.gradClipNorm must be >= 0 (0 disables clipping), got ${out.gradClipNorm}`);
  return out;
}

/** {@link AdamParams} as sent in `adam_params` (Tinker and Weaver). */
export function adamParamsToWire(params: AdamParams): AdamParamsWire {
  return {
    learning_rate: params.learningRate,
    beta1: params.beta1,
    beta2: params.beta2,
    eps: params.eps,
    weight_decay: params.weightDecay,
    grad_clip_norm: params.gradClipNorm,
  };
}

/** {@link AdamParams} from a received `adam_params` (`nexrl serve`). */
export function adamParamsFromWire(wire: AdamParamsWire): AdamParams {
  return {
    learningRate: wire.learning_rate,
    beta1: wire.beta1,
    beta2: wire.beta2,
    eps: wire.eps,
    weightDecay: wire.weight_decay,
    gradClipNorm: wire.grad_clip_norm,
  };
}

/** Loss-input names that the Tinker SDK coerces to int64; every other name is float32. */
const INT64_KEYS = new Set(["target_tokens"]);

/** The dtype the Tinker SDK gives a raw list passed under `key`. */
export function dtypeForKey(key: string): TensorDtype {
  return INT64_KEYS.has(key) ? "int64" : "float32";
}

/**
 * Builds a 1-D {@link TensorData} from a plain array.
 * @throws {@link "nexrl/errors".InputError | InputError} on non-finite values, or non-integers for `int64`.
 */
export function tensorData(values: ArrayLike<number>, dtype: TensorDtype): TensorData {
  const data = Array.from(values);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    if (!Number.isFinite(v))
      throw new InputError(`tensor value at index ${i} is ${v}; only finite numbers can be sent`);
    if (dtype === "int64" && !Number.isInteger(v)) {
      throw new InputError(`int64 tensor value at index ${i} is ${v}; expected an integer`);
    }
  }
  return { data, dtype };
}

/** Number of elements a {@link TensorData} holds (the product of its shape, or `data.length`). */
export function tensorSize(tensor: TensorData): number {
  return tensor.shape ? tensor.shape.reduce((a, b) => a * b, 1) : tensor.data.length;
}

/** The dense values of a {@link TensorData} (expands CSR tensors). */
export function tensorValues(tensor: TensorData): number[] {
  if (!tensor.sparse_crow_indices || !tensor.sparse_col_indices) return tensor.data;
  const [rows, cols] = tensor.shape ?? [];
  if (rows === undefined || cols === undefined) {
    throw new InputError("a sparse (CSR) tensor needs a 2-D shape");
  }
  const dense = new Array<number>(rows * cols).fill(0);
  for (let r = 0; r < rows; r++) {
    for (let k = tensor.sparse_crow_indices[r]!; k < tensor.sparse_crow_indices[r + 1]!; k++) {
      dense[r * cols + tensor.sparse_col_indices[k]!] = tensor.data[k]!;
    }
  }
  return dense;
}

/** A {@link ModelInput} holding one `encoded_text` chunk. */
export function modelInputFromTokens(tokens: ArrayLike<number>): ModelInput {
  return { chunks: [{ type: "encoded_text", tokens: tensorData(tokens, "int64").data }] };
}

/** Number of positions of a {@link ModelInput}; images count their `expected_tokens`. */
export function modelInputLength(input: ModelInput): number {
  let n = 0;
  for (const chunk of input.chunks) {
    if (chunk.type === "encoded_text") n += chunk.tokens.length;
    else if (chunk.expected_tokens !== undefined) n += chunk.expected_tokens;
    else throw new InputError(`an ${chunk.type} chunk without expected_tokens has no known length`);
  }
  return n;
}

/** The token ids of a {@link ModelInput} made only of `encoded_text` chunks. */
export function modelInputTokens(input: ModelInput): number[] {
  const tokens: number[] = [];
  for (const chunk of input.chunks) {
    if (chunk.type !== "encoded_text") throw new InputError(`a ${chunk.type} chunk has no token ids`);
    appendAll(tokens, chunk.tokens);
  }
  return tokens;
}

/**
 * Builds a {@link Datum} from plain arrays: `inputTokens` become the model input and each
 * entry of `lossFnInputs` a 1-D tensor with the dtype the Tinker SDK would give it
 * (`target_tokens` int64, everything else float32).
 */
export function datum(inputTokens: ArrayLike<number>, lossFnInputs: Record<string, ArrayLike<number>>): Datum {
  const loss_fn_inputs: Record<string, TensorData> = {};
  for (const [key, values] of Object.entries(lossFnInputs)) {
    loss_fn_inputs[key] = tensorData(values, dtypeForKey(key));
  }
  return { model_input: modelInputFromTokens(inputTokens), loss_fn_inputs };
}
