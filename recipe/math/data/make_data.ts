/**
 * Generates the arithmetic datasets deterministically:
 * - `train.jsonl` / `test.jsonl`: sums and differences of numbers below 100 and products up to
 *   12 × 12, for the remote recipes (a large model already knows these);
 * - `easy_train.jsonl` / `easy_test.jsonl`: an easy curriculum for the embedded engine's tiny
 *   byte-level model, which knows no arithmetic: mostly questions whose answer is one of the
 *   operands (`37 + 0`, `0 + 37`, `37 * 1`, `37 - 0`, learnt by copying), plus one-digit sums and
 *   differences (learnt by heart).
 *
 * Run `npx tsx recipe/math/data/make_data.ts` to rewrite the files; the recipe tests check that
 * the committed files equal what this script produces. Each row has a `prompt` (a question), a
 * `ground_truth` (the answer as a string of digits) and a `data_source` (`addition`,
 * `subtraction` or `multiplication`); the train and test files of a dataset share no question.
 * @module
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { seededRandom } from "nexrl/testing";

/** One arithmetic question. */
export interface MathRow {
  /** The question, e.g. `What is 23 + 58?`. */
  prompt: string;
  /** The exact answer, e.g. `81`. */
  ground_truth: string;
  /** The operation, for per-source validation metrics. */
  data_source: "addition" | "subtraction" | "multiplication";
}

/** Rows in each split. */
const TRAIN_SIZE = 400;
const TEST_SIZE = 100;

/** The train and test rows: sums and differences of numbers below 100, products up to 12 × 12. */
export function makeRows(): { train: MathRow[]; test: MathRow[] } {
  const next = seededRandom(7);
  const between = (low: number, high: number): number => low + Math.floor(next() * (high - low + 1));
  const rows = new Map<string, MathRow>();
  while (rows.size < TRAIN_SIZE + TEST_SIZE) {
    const kind = between(0, 2);
    let row: MathRow;
    if (kind === 0) {
      const [a, b] = [between(1, 99), between(1, 99)];
      row = { prompt: `What is ${a} + ${b}?`, ground_truth: String(a + b), data_source: "addition" };
    } else if (kind === 1) {
      const [a, b] = [between(1, 99), between(1, 99)].sort((x, y) => y - x) as [number, number];
      row = { prompt: `What is ${a} - ${b}?`, ground_truth: String(a - b), data_source: "subtraction" };
    } else {
      const [a, b] = [between(2, 12), between(2, 12)];
      row = { prompt: `What is ${a} * ${b}?`, ground_truth: String(a * b), data_source: "multiplication" };
    }
    rows.set(row.prompt, row);
  }
  const all = [...rows.values()];
  return { train: all.slice(0, TRAIN_SIZE), test: all.slice(TRAIN_SIZE) };
}

/** The easy curriculum's train and test rows: operand-copying questions and one-digit facts, shuffled. */
export function makeEasyRows(): { train: MathRow[]; test: MathRow[] } {
  const rows = new Map<string, MathRow>();
  const add = (a: number, op: "+" | "-" | "*", b: number): void => {
    const [answer, source] = op === "+" ? [a + b, "addition" as const] : op === "-" ? [a - b, "subtraction" as const] : [a * b, "multiplication" as const];
    rows.set(`${a} ${op} ${b}`, { prompt: `What is ${a} ${op} ${b}?`, ground_truth: String(answer), data_source: source });
  };
  for (let a = 0; a < 100; a++) {
    add(a, "+", 0);
    add(0, "+", a);
    add(a, "*", 1);
    add(a, "-", 0);
  }
  for (let a = 1; a < 10; a++) {
    for (let b = 1; b < 10; b++) {
      add(a, "+", b);
      if (a >= b) add(a, "-", b);
    }
  }
  const next = seededRandom(11);
  const all = [...rows.values()];
  for (let i = all.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [all[i], all[j]] = [all[j]!, all[i]!];
  }
  return { train: all.slice(0, TRAIN_SIZE), test: all.slice(TRAIN_SIZE, TRAIN_SIZE + TEST_SIZE) };
}

/** File name → JSONL content, as committed. */
export function renderFiles(): Record<string, string> {
  const { train, test } = makeRows();
  const easy = makeEasyRows();
  const jsonl = (rows: MathRow[]): string => rows.map((row) => JSON.stringify(row)).join("\n") + "\n";
  return { "train.jsonl": jsonl(train), "test.jsonl": jsonl(test), "easy_train.jsonl": jsonl(easy.train), "easy_test.jsonl": jsonl(easy.test) };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [name, content] of Object.entries(renderFiles())) {
    writeFileSync(fileURLToPath(new URL(name, import.meta.url)), content);
  }
}
