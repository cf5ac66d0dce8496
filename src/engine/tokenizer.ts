/**
 * The byte-level tokenizer of the local engine.
 *
 * @module
 */
import {
  decodeAround,
  type ChatMessage,
  type ChatTemplateOptions,
  type DecodeOptions,
  type EncodeOptions,
  type Tokenizer,
} from "../wire/tokenizer.js";
import { appendAll } from "../wire/arrays.js";
import { InputError } from "../errors.js";

const BYTE_COUNT = 256;

/**
 * Byte-level tokenizer: ids 0–255 are the UTF-8 bytes of the text, then BOS (256), EOS (257) and
 * PAD (258), 259 ids in all.
 *
 * Chat template: `BOS`, then for each message the bytes of `<|role|>\n` and the content followed
 * by `EOS`; with `addGenerationPrompt`, the bytes of `<|assistant|>\n` at the end. An assistant
 * reply therefore ends with EOS, which stops sampling, and the template of a longer conversation
 * extends the tokens of a shorter one exactly (prompt + sampled reply is a prefix of the next
 * turn's prompt).
 */
export class ByteTokenizer implements Tokenizer {
  readonly vocabSize = BYTE_COUNT + 3;
  readonly bosId = BYTE_COUNT;
  readonly eosId = BYTE_COUNT + 1;
  readonly padId = BYTE_COUNT + 2;
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder("utf-8", { fatal: false });

  encode(text: string, options: EncodeOptions = {}): number[] {
    const ids = Array.from(this.encoder.encode(text));
    if (options.addBos) ids.unshift(this.bosId);
    return ids;
  }

  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    if (options.unknownIds !== undefined && options.unknownIds !== "throw") {
      const known = (id: number): boolean => Number.isInteger(id) && id >= 0 && id < this.vocabSize;
      return decodeAround(ids, known, (run) => this.decode(run), options);
    }
    const bytes = new Uint8Array(ids.length);
    let n = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new InputError(
          `cannot decode token id ${id} at index ${i}: the byte tokenizer has ids 0..${this.vocabSize - 1}`,
        );
      }
      if (id < BYTE_COUNT) bytes[n++] = id;
    }
    return this.decoder.decode(bytes.subarray(0, n));
  }

  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): number[] {
    const ids = [this.bosId];
    for (const message of messages) {
      appendAll(ids, this.encode(`<|${message.role}|>\n${message.content}`)).push(this.eosId);
    }
    if (options.addGenerationPrompt) appendAll(ids, this.encode("<|assistant|>\n"));
    return ids;
  }
}
