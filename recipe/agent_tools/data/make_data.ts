/**
 * Generates the tool-use datasets deterministically:
 * - `codes.json`: the secret three-digit code of each of 48 three-letter animal names — only the `get` tool
 *   knows them, so a model can answer `code fox?` only by calling it;
 * - `train.jsonl` / `test.jsonl`: half code questions (`code fox?`, answered with the `get` tool;
 *   the test split asks about animals the train split never mentions), half products of two
 *   two-digit numbers (`37*41`, answered with the `calc` tool).
 *
 * Each row has the `question`, the exact `answer`, the `tool` that answers it with its
 * `arguments`, and a `data_source` (`lookup` or `calc`). The questions and tool names are short
 * so that a whole episode (question, tool call, tool result, answer) fits the 128-token context of
 * the embedded engine's tiny model.
 *
 * Run `npx tsx recipe/agent_tools/data/make_data.ts` to rewrite the files.
 * @module
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { seededRandom } from "nexrl/testing";

/** One tool-use question. */
export interface ToolRow {
  /** The question, e.g. `code fox?` or `37*41`. */
  question: string;
  /** The exact answer, e.g. `482`. */
  answer: string;
  /** The tool that answers it. */
  tool: "get" | "calc";
  /** Its arguments. */
  arguments: { k: string } | { e: string };
  /** The kind of question, for per-source validation metrics. */
  data_source: "lookup" | "calc";
}

const ANIMALS = [
  "ant", "ape", "asp", "bat", "bee", "boa", "cat", "cod", "cow", "doe", "dog", "eel",
  "elk", "emu", "ewe", "fox", "gar", "gnu", "hen", "hog", "jay", "kea", "kid", "koi",
  "ram", "rat", "yak", "owl", "pig", "pug", "eft", "auk", "bug", "cub", "dab", "fly",
  "cob", "kit", "nit", "roe", "sow", "tit", "tom", "pup", "hob", "ass", "ide", "tup",
];

/** Animals asked about in test questions only. */
const TEST_ANIMALS = 12;
const TRAIN_SIZE = 400;
const TEST_SIZE = 40;

/** The codes, the train rows and the test rows. */
export function makeData(): { codes: Record<string, string>; train: ToolRow[]; test: ToolRow[] } {
  const next = seededRandom(11);
  const between = (low: number, high: number): number => low + Math.floor(next() * (high - low + 1));
  const codes: Record<string, string> = {};
  for (const animal of ANIMALS) codes[animal] = String(between(100, 999));
  const trainAnimals = ANIMALS.slice(TEST_ANIMALS);
  const testAnimals = ANIMALS.slice(0, TEST_ANIMALS);
  const seen = new Set<string>();
  const rows = (count: number, animals: readonly string[]): ToolRow[] => {
    const out: ToolRow[] = [];
    while (out.length < count) {
      if (out.length % 2 === 0) {
        const animal = animals[between(0, animals.length - 1)]!;
        out.push({ question: `code ${animal}?`, answer: codes[animal]!, tool: "get", arguments: { k: animal }, data_source: "lookup" });
      } else {
        const [a, b] = [between(10, 99), between(10, 99)];
        const expression = `${a}*${b}`;
        if (seen.has(expression)) continue;
        seen.add(expression);
        out.push({ question: expression, answer: String(a * b), tool: "calc", arguments: { e: expression }, data_source: "calc" });
      }
    }
    return out;
  };
  return { codes, train: rows(TRAIN_SIZE, trainAnimals), test: rows(TEST_SIZE, testAnimals) };
}

/** The files of `data/`, by name. */
export function renderFiles(): Record<string, string> {
  const { codes, train, test } = makeData();
  const jsonl = (rows: readonly ToolRow[]) => rows.map((row) => JSON.stringify(row)).join("\n") + "\n";
  return { "codes.json": `${JSON.stringify(codes, null, 1)}\n`, "train.jsonl": jsonl(train), "test.jsonl": jsonl(test) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const dir = fileURLToPath(new URL(".", import.meta.url));
  for (const [name, content] of Object.entries(renderFiles())) writeFileSync(dir + name, content);
}
