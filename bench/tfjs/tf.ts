/**
 * The slice of the TensorFlow.js API that the reference model uses, typed by hand: tfjs is
 * installed into bench/tfjs/node_modules only when the engine suite first runs, so the project's
 * typecheck cannot read its own declarations. Signatures follow @tensorflow/tfjs-core 4.22.
 */

export type DType = "float32" | "int32";

export interface Tensor {
  dataSync(): Float32Array | Int32Array;
  dispose(): void;
}

/** A trainable tensor (`tf.Variable`); the model only hands variables to the optimizer. */
export type Variable = Tensor;

export interface Optimizer {
  /** Computes `f`, its gradients with respect to `varList`, and applies one update. */
  minimize(f: () => Tensor, returnCost: true, varList: Variable[]): Tensor;
  dispose(): void;
}

type Operand = Tensor | number;

export interface Tf {
  readonly version_core: string;
  setBackend(name: string): Promise<boolean>;
  ready(): Promise<void>;
  getBackend(): string;
  enableProdMode(): void;
  env(): { getBool(flag: string): boolean };

  tidy<T extends Tensor>(fn: () => T): T;
  keep<T extends Tensor>(t: T): T;
  variable(initial: Tensor, trainable?: boolean, name?: string): Variable;
  randomNormal(shape: number[], mean?: number, stdDev?: number, dtype?: DType, seed?: number): Tensor;
  zeros(shape: number[]): Tensor;
  ones(shape: number[]): Tensor;
  tensor1d(values: ArrayLike<number>, dtype?: DType): Tensor;
  tensor2d(values: ArrayLike<number>, shape: [number, number], dtype?: DType): Tensor;

  add(a: Operand, b: Operand): Tensor;
  sub(a: Operand, b: Operand): Tensor;
  mul(a: Operand, b: Operand): Tensor;
  neg(x: Tensor): Tensor;
  square(x: Tensor): Tensor;
  rsqrt(x: Tensor): Tensor;
  tanh(x: Tensor): Tensor;
  cast(x: Tensor, dtype: DType): Tensor;
  sum(x: Tensor, axis?: number, keepDims?: boolean): Tensor;
  mean(x: Tensor, axis?: number, keepDims?: boolean): Tensor;
  matMul(a: Tensor, b: Tensor, transposeA?: boolean, transposeB?: boolean): Tensor;
  reshape(x: Tensor, shape: number[]): Tensor;
  transpose(x: Tensor, perm: number[]): Tensor;
  slice(x: Tensor, begin: number[], size: number[]): Tensor;
  split(x: Tensor, numOrSizeSplits: number, axis: number): Tensor[];
  oneHot(indices: Tensor, depth: number): Tensor;
  softmax(logits: Tensor): Tensor;
  logSoftmax(logits: Tensor): Tensor;
  multinomial(logits: Tensor, numSamples: number, seed?: number): Tensor;

  train: { adam(learningRate: number, beta1: number, beta2: number, epsilon: number): Optimizer };
}

export interface TfWasm {
  setWasmPaths(prefix: string): void;
}
