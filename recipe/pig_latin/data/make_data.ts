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

/** Everyday phrases. */
const PHRASES = [
  "good morning", "good night", "thank you very much", "see you later", "how are you today",
  "where is the train station", "i love to read books", "it is a sunny day", "please close the door",
  "what time is it", "the weather is nice", "i am very hungry", "let us go home", "happy birthday to you",
  "nice to meet you", "have a great day", "i like green tea", "the store opens at nine", "my name is sam",
  "we need more milk", "can you help me", "the music is too loud", "turn left at the corner", "i lost my keys",
  "she speaks three languages", "the baby is sleeping", "bring your umbrella", "the train is late",
  "water the plants", "dinner is ready", "call me tomorrow", "the movie was funny", "quiet please",
  "open your books", "write your name here", "the sky is clear tonight", "they play soccer after school",
  "this soup is hot", "the library is closed", "square boxes stack well",
];

/** Sentence parts for `subject verb object` phrases. */
const SUBJECTS = [
  "the cat", "a dog", "my friend", "the teacher", "our team", "the little bird", "a farmer", "the old man",
  "her brother", "the children", "this student", "the doctor", "your mother", "the queen", "a small fish", "the strong horse",
];
const VERBS = [
  "likes", "sees", "wants", "finds", "eats", "reads", "builds", "paints",
  "carries", "opens", "cleans", "follows", "brings", "watches", "plays with", "thinks about",
];
const OBJECTS = [
  "the red apple", "a green book", "the big house", "some fresh bread", "the blue sky", "a quiet street",
  "the yellow flower", "an open window", "the long river", "a warm blanket", "the new school", "three small stones",
  "the sweet cake", "a bright star", "the wooden chair", "the quick fox",
];

/** Number of generated `subject verb object` phrases. */
const GENERATED = 320;
/** Every `VAL_EVERY`-th phrase goes to the validation split. */
const VAL_EVERY = 10;

/** The train and validation rows. */
export function makeRows(): { train: PigLatinRow[]; val: PigLatinRow[] } {
  const next = seededRandom(42);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const phrases = new Set(PHRASES);
  while (phrases.size < PHRASES.length + GENERATED) phrases.add(`${pick(SUBJECTS)} ${pick(VERBS)} ${pick(OBJECTS)}`);
  const ordered = [...phrases];
  for (let i = ordered.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [ordered[i], ordered[j]] = [ordered[j]!, ordered[i]!];
  }
  const rows = ordered.map((input) => ({ input, output: pigLatin(input) }));
  return { train: rows.filter((_, i) => i % VAL_EVERY !== 0), val: rows.filter((_, i) => i % VAL_EVERY === 0) };
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
