/**
 * Generates the preference dataset (`train.jsonl`, `val.jsonl`) deterministically.
 *
 * Run `npx tsx recipe/preference/data/make_data.ts` to rewrite the files; the recipe tests check
 * that the committed files equal what this script produces.
 *
 * Task: the prompt `lowercase: <phrase>` or `uppercase: <phrase>` shows a phrase of two or three
 * words in mixed case (`uppercase: Red cAT runs`). The chosen answer follows the instruction
 * (`RED CAT RUNS`); the rejected one writes the phrase in the other case (`red cat runs`). Both
 * cases are as common in chosen answers as in rejected ones, so no letter is better than another
 * by itself: the model has to read the instruction, which a tiny model learns from pairs in a
 * few minutes.
 * @module
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { seededRandom } from "nexrl/testing";

/** One preference pair. */
export interface PreferenceRow {
  /** The instruction and the phrase. */
  prompt: string;
  /** The phrase in the case the instruction asks for. */
  chosen: string;
  /** The phrase in the other case. */
  rejected: string;
}

/** Adjectives. */
const ADJECTIVES = ["red", "green", "blue", "big", "old", "quick", "happy", "sweet", "bright", "open"];
/** Nouns. */
const NOUNS = ["cat", "dog", "bird", "fish", "apple", "book", "house", "tree", "friend", "egg"];
/** Verbs in the third person. */
const VERBS = ["runs", "sleeps", "sings", "eats", "reads", "jumps", "swims", "plays"];

/** Rows in each split. */
const TRAIN_SIZE = 1200;
const VAL_SIZE = 40;

/** `word` with each letter capitalised with probability one half. */
function mixCase(word: string, next: () => number): string {
  return [...word].map((c) => (next() < 0.5 ? c.toUpperCase() : c)).join("");
}

/** A mixed-case phrase: `ADJ NOUN` or `ADJ NOUN VERB`, with at least one capital. */
function phrase(pick: <T>(items: readonly T[]) => T, next: () => number): string {
  const words = next() < 0.5 ? [pick(ADJECTIVES), pick(NOUNS)] : [pick(ADJECTIVES), pick(NOUNS), pick(VERBS)];
  let mixed = words.map((w) => mixCase(w, next)).join(" ");
  if (mixed === mixed.toLowerCase()) mixed = mixed[0]!.toUpperCase() + mixed.slice(1);
  return mixed;
}

/**
 * The train and validation rows: distinct prompts (a validation phrase, in its mix of cases, is
 * never a training one).
 */
export function makeRows(): { train: PreferenceRow[]; val: PreferenceRow[] } {
  const next = seededRandom(7);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const phrases = new Set<string>();
  while (phrases.size < TRAIN_SIZE + VAL_SIZE) phrases.add(phrase(pick, next));
  const rows = [...phrases].map((mixed) => {
    const [lower, upper] = [mixed.toLowerCase(), mixed.toUpperCase()];
    return next() < 0.5
      ? { prompt: `lowercase: ${mixed}`, chosen: lower, rejected: upper }
      : { prompt: `uppercase: ${mixed}`, chosen: upper, rejected: lower };
  });
  return { train: rows.slice(0, TRAIN_SIZE), val: rows.slice(TRAIN_SIZE) };
}

/** File name → JSONL content, as committed. */
export function renderFiles(): Record<string, string> {
  const { train, val } = makeRows();
  const jsonl = (rows: PreferenceRow[]): string => rows.map((row) => JSON.stringify(row)).join("\n") + "\n";
  return { "train.jsonl": jsonl(train), "val.jsonl": jsonl(val) };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [name, content] of Object.entries(renderFiles())) {
    writeFileSync(fileURLToPath(new URL(name, import.meta.url)), content);
  }
}
