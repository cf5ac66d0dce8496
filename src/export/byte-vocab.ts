/**
 * The local engine's byte tokenizer as a byte-level BPE vocabulary: token i < 256 is byte i,
 * spelled with GPT-2's byte-to-character map (printable bytes as themselves, the others shifted
 * to U+0100 and up), so byte-level tokenizers (Hugging Face, llama.cpp) give the engine's ids.
 * @module
 * @internal
 */
import { ByteTokenizer } from "../engine/tokenizer.js";

/** Names of the special tokens after the 256 bytes. */
export const SPECIAL_TOKENS = { bos: "<|bos|>", eos: "<|eos|>", pad: "<|pad|>" } as const;

/** GPT-2's `bytes_to_unicode`: the character that stands for each byte. */
export function byteCharacters(): string[] {
  const chars: string[] = new Array(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    chars[b] = String.fromCodePoint(printable ? b : 256 + shifted++);
  }
  return chars;
}

/** Every token's text, by id: bytes, BOS, EOS, PAD, then `<|unused_N|>` up to `vocabSize`. */
export function vocabularyTokens(vocabSize: number): string[] {
  const tokens = [...byteCharacters(), SPECIAL_TOKENS.bos, SPECIAL_TOKENS.eos, SPECIAL_TOKENS.pad];
  for (let id = tokens.length; id < vocabSize; id++) tokens.push(`<|unused_${id}|>`);
  return tokens;
}

/** The byte tokenizer's chat format (see {@link ByteTokenizer.applyChatTemplate}) as a Jinja chat template. */
export const BYTE_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

/** The ids of BOS, EOS and PAD. */
export function specialIds(): { bos: number; eos: number; pad: number } {
  const t = new ByteTokenizer();
  return { bos: t.bosId, eos: t.eosId, pad: t.padId };
}
