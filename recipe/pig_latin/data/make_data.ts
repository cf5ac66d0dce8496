/**
 * Generates the Pig Latin dataset (`train.jsonl`, `val.jsonl`) deterministically.
 *
 * Run `npx tsx recipe/pig_latin/data/make_data.ts` to rewrite the files; the recipe tests check
 * that the committed files equal what this script produces.
 *
 * Rule (hyphenated style, as in the Tinker cookbook example): a word that starts with a vowel
 * gets `-way` (`apple` → `apple-way`); otherwise the consonants before the first vowel move to
 * the end after a hyphen, followed by `ay` (`hello` → `ello-hay`, `string` → `ing-stray`). `qu`
 * moves together (`quiet` → `iet-quay`) and `y` counts as a vowel except as the first letter
 * (`my` → `y-may`, `yellow` → `ellow-yay`).
 * @module
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { seededRandom } from "nexrl/testing";

/** One example: an English phrase and its Pig Latin. */
export interface PigLatinRow {
  /** Lower-case English words separated by single spaces. */
  input: string;
  /** The same words in Pig Latin. */
  output: string;
}

/** Translates one lower-case word. */
export function pigLatinWord(word: string): string {
  const isVowel = (i: number): boolean => "aeiou".includes(word[i]!) || (word[i] === "y" && i > 0);
  if (isVowel(0)) return `${word}-way`;
  let split = 0;
  while (split < word.length && !isVowel(split)) split += 1;
  if (word[split] === "u" && word[split - 1] === "q") split += 1;
  if (split >= word.length) return `${word}-ay`;
  return `${word.slice(split)}-${word.slice(0, split)}ay`;
}

/** Translates a phrase word by word. */
export function pigLatin(phrase: string): string {
  return phrase.split(" ").map(pigLatinWord).join(" ");
}

/**
 * Determiners; `a` becomes `an` before a vowel. The phrases use 39 words in all (these, `an`, and
 * the three lists below), with every kind of onset (none, one consonant, clusters, `qu`, `y`): a
 * vocabulary the small model learns to translate in a few minutes. Validation phrases are new
 * combinations of the same words.
 */
const DETERMINERS = ["the", "a", "my", "your", "this", "his"];
/** Adjectives. */
const ADJECTIVES = ["red", "green", "blue", "big", "old", "quick", "happy", "strong", "sweet", "bright", "yellow", "open"];
/** Nouns. */
const NOUNS = ["cat", "dog", "bird", "fish", "apple", "book", "house", "tree", "friend", "school", "queen", "egg"];
/** Verbs in the third person. */
const VERBS = ["runs", "sleeps", "sings", "eats", "reads", "jumps", "swims", "plays"];

/** Rows in each split. */
const TRAIN_SIZE = 1600;
const VAL_SIZE = 40;

/**
 * A phrase of two to four words: `ADJ NOUN`, `DET NOUN VERB`, `DET ADJ NOUN` or
 * `DET ADJ NOUN VERB`.
 */
function phrase(pick: <T>(items: readonly T[]) => T, next: () => number): string {
  const shape = Math.floor(next() * 4);
  const words =
    shape === 0
      ? [pick(ADJECTIVES), pick(NOUNS)]
      : shape === 1
        ? [pick(DETERMINERS), pick(NOUNS), pick(VERBS)]
        : shape === 2
          ? [pick(DETERMINERS), pick(ADJECTIVES), pick(NOUNS)]
          : [pick(DETERMINERS), pick(ADJECTIVES), pick(NOUNS), pick(VERBS)];
  if (words[0] === "a" && "aeiou".includes(words[1]![0]!)) words[0] = "an";
  return words.join(" ");
}

/**
 * The train and validation rows: distinct phrases (a validation phrase is never a training
 * phrase, but its words all occur in training).
 */
export function makeRows(): { train: PigLatinRow[]; val: PigLatinRow[] } {
  const next = seededRandom(42);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const phrases = new Set<string>();
  while (phrases.size < TRAIN_SIZE + VAL_SIZE) phrases.add(phrase(pick, next));
  const rows = [...phrases].map((input) => ({ input, output: pigLatin(input) }));
  return { train: rows.slice(0, TRAIN_SIZE), val: rows.slice(TRAIN_SIZE) };
}

/** File name → JSONL content, as committed. */
export function renderFiles(): Record<string, string> {
  const { train, val } = makeRows();
  const jsonl = (rows: PigLatinRow[]): string => rows.map((row) => JSON.stringify(row)).join("\n") + "\n";
  return { "train.jsonl": jsonl(train), "val.jsonl": jsonl(val) };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [name, content] of Object.entries(renderFiles())) {
    writeFileSync(fileURLToPath(new URL(name, import.meta.url)), content);
  }
}
