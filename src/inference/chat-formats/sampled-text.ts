/**
 * Sampled tokens as the text a chat format reads. Tokenizers leave special tokens out of decoded
 * text, but several families' markers are special tokens (Llama's `<|python_tag|>`, Harmony's
 * `<|channel|>`, Kimi's and Mistral's call markers), so the parser reads the text with them
 * written out, and what it answers is cleaned of those left over (an end-of-turn token).
 * @module
 */
import type { Tokenizer } from "../../wire/tokenizer.js";

const SKIP = { unknownIds: "skip" } as const;
const KEEP = { unknownIds: "skip", specialTokens: "keep" } as const;

/** Per tokenizer, the text of each id seen so far that is a special token ("" for ordinary ids). */
const specialTexts = new WeakMap<Tokenizer, Map<number, string>>();

function specialText(tokenizer: Tokenizer, id: number): string {
  let known = specialTexts.get(tokenizer);
  if (!known) specialTexts.set(tokenizer, (known = new Map()));
  let text = known.get(id);
  if (text === undefined) {
    text = tokenizer.decode([id], SKIP) === "" ? tokenizer.decode([id], KEEP) : "";
    known.set(id, text);
  }
  return text;
}

/** Sampled text with its special tokens written out. */
export interface SampledText {
  /** The text, special tokens included, cut where the plain text was cut. */
  text: string;
  /** The texts of the special tokens in it. */
  specialTokens: string[];
}

/**
 * The text of `tokens` with special tokens written out, cut where `plain` (their decoding
 * without special tokens, cut at a stop string) ends, without the special tokens that end it
 * (the end of the turn: `<|eot_id|>`, `<|im_end|>`, Harmony's `<|call|>`). Tokens without
 * special ones read as `plain`.
 */
export function sampledText(tokenizer: Tokenizer, tokens: readonly number[], plain: string): SampledText {
  const full = tokenizer.decode(tokens, SKIP);
  if (tokenizer.decode(tokens, KEEP) === full) return { text: plain, specialTokens: [] };
  const limit = plain.length < full.length ? plain.length : Infinity;
  const specials = new Set<string>();
  let text = "";
  /** Where the text ends without the special tokens after its last ordinary one. */
  let ordinaryEnd = 0;
  let plainLength = 0;
  let run: number[] = [];
  /** Adds the ordinary tokens read so far; false once the cut is reached. */
  const flush = (): boolean => {
    const piece = run.length > 0 ? tokenizer.decode(run, SKIP) : "";
    run = [];
    text += piece.slice(0, Math.max(0, limit - plainLength));
    if (piece !== "") ordinaryEnd = text.length;
    plainLength += piece.length;
    return plainLength < limit;
  };
  for (const id of tokens) {
    const special = specialText(tokenizer, id);
    if (special === "") {
      run.push(id);
      continue;
    }
    if (!flush()) break;
    text += special;
    specials.add(special);
  }
  if (run.length > 0) flush();
  return { text: text.slice(0, ordinaryEnd), specialTokens: [...specials] };
}

/** `text` without the special tokens' texts. */
export function withoutSpecialTokens(text: string, specialTokens: readonly string[]): string {
  return specialTokens.reduce((t, special) => t.split(special).join(""), text);
}
