/**
 * Datum arrays that are read from arrays they do not own — a trajectory's tokens, logprobs and
 * loss mask — instead of being copied out of them. `trajectoryToDatum` builds its datums from
 * them: a client that writes a datum's JSON straight from the source arrays (the Tinker client)
 * never copies them, and anything that reads `tokens` or `data` gets an ordinary array, built on
 * the first read and the same array after.
 *
 * @module
 */
import type { EncodedTextChunk, TensorData, TensorDtype } from "./wire.js";

/** A stretch of an array: its values from `array[start]` on. */
export interface ArrayWindow {
  /** The array read. */
  readonly array: readonly number[];
  /** Index in `array` of the first value. */
  readonly start: number;
}

/** What defines the values of a {@link LazyValues}: a window of an array, or a function of the index. */
export type ValueSource = { readonly window: ArrayWindow } | { readonly at: (index: number) => number };

/**
 * The values of one datum array, defined by a {@link ValueSource} until they are first read;
 * then built as an array, which is kept (and may be changed in place or replaced like any datum
 * array).
 */
export class LazyValues {
  private built: number[] | undefined;

  /**
   * @param length number of values.
   * @param source where value `i` comes from; arrays are read, not copied, so they must not
   *   change until the values are read or sent.
   */
  constructor(
    readonly length: number,
    readonly source: ValueSource,
  ) {}

  /** True while nothing has read or replaced the values: `source` still defines them. */
  get unread(): boolean {
    return this.built === undefined;
  }

  /** Number of values, without building them. */
  get size(): number {
    return this.built === undefined ? this.length : this.built.length;
  }

  /** The values as an array, built on the first call. */
  read(): number[] {
    if (this.built !== undefined) return this.built;
    const { source, length } = this;
    if ("window" in source) {
      this.built = source.window.array.slice(source.window.start, source.window.start + length);
    } else {
      const values: number[] = [];
      for (let i = 0; i < length; i++) values.push(source.at(i));
      this.built = values;
    }
    return this.built;
  }

  /** Replaces the values (an assignment to the array property). */
  replace(values: number[]): void {
    this.built = values;
  }
}

/**
 * The descriptor of an enumerable own property backed by the {@link LazyValues} that `valuesOf`
 * finds on the object. One descriptor (the same getter and setter) serves every instance, so that
 * they all share one shape: an accessor of its own per object would put each in dictionary mode,
 * and such objects survive scavenges — as costly as the copies the views spare. It cannot be
 * deleted or redefined, so every read and write of the property goes through the values.
 */
function lazyDescriptor(valuesOf: (target: object) => LazyValues): PropertyDescriptor {
  return {
    get(this: object): number[] {
      return valuesOf(this).read();
    },
    set(this: object, value: number[]): void {
      valuesOf(this).replace(value);
    },
    enumerable: true,
    configurable: false,
  };
}

/** A {@link TensorData} whose `data` is a {@link LazyValues}. Its own keys are `data` and `dtype`, as for a plain tensor. */
export class TensorView implements TensorData {
  static readonly #data = lazyDescriptor((tensor) => (tensor as TensorView).#values);
  declare data: number[];
  declare dtype: TensorDtype;
  readonly #values: LazyValues;

  /**
   * @param values the values of `data`.
   * @param dtype the element type.
   */
  constructor(values: LazyValues, dtype: TensorDtype) {
    this.#values = values;
    Object.defineProperty(this, "data", TensorView.#data);
    this.dtype = dtype;
  }

  /** The lazy values behind `tensor`, when it is a {@link TensorView}. */
  static valuesOf(tensor: TensorData): LazyValues | undefined {
    return #values in tensor ? tensor.#values : undefined;
  }
}

/** An {@link EncodedTextChunk} whose `tokens` are a {@link LazyValues}. Its own keys are `type` and `tokens`, as for a plain chunk. */
export class TokensView implements EncodedTextChunk {
  static readonly #tokens = lazyDescriptor((chunk) => (chunk as TokensView).#values);
  declare type: "encoded_text";
  declare tokens: number[];
  readonly #values: LazyValues;

  /** @param values the token ids. */
  constructor(values: LazyValues) {
    this.type = "encoded_text";
    this.#values = values;
    Object.defineProperty(this, "tokens", TokensView.#tokens);
  }

  /** The lazy values behind `chunk`, when it is a {@link TokensView}. */
  static valuesOf(chunk: EncodedTextChunk): LazyValues | undefined {
    return #values in chunk ? chunk.#values : undefined;
  }
}

/** Number of values of `tensor`, without building lazy ones. */
export function valueCount(tensor: TensorData): number {
  return TensorView.valuesOf(tensor)?.size ?? tensor.data.length;
}

/** Number of token ids of `chunk`, without building lazy ones. */
export function tokenCount(chunk: EncodedTextChunk): number {
  return TokensView.valuesOf(chunk)?.size ?? chunk.tokens.length;
}
