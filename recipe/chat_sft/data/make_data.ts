/**
 * Generates the chat SFT dataset (`train.jsonl`, `val.jsonl`) deterministically, as OpenAI
 * fine-tuning rows: `{"messages": [{"role": "system" | "user" | "assistant", "content": ...}]}`.
 *
 * Run `npx tsx recipe/chat_sft/data/make_data.ts` to rewrite the files; the recipe test checks
 * that the committed files equal what this script produces.
 *
 * The assistant answers sums and differences of small numbers written in words, in a fixed
 * sentence: `seven minus three` → `seven minus three is four.` Some conversations open with a
 * system message, some ask a second question (every assistant message is trained). A validation
 * conversation asks only questions no training conversation asks, so the model must use what it
 * learnt of the format and of the words, not recall the row.
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

/** One message of a row. */
interface Message {
  role: "system" | "user" | "assistant";
  content: string;
}

/** One row of the data files. */
export interface ChatRow {
  messages: Message[];
}

const WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
const SYSTEM = "Answer in words.";

/** Rows in each split. */
const TRAIN_SIZE = 400;
const VAL_SIZE = 24;
/** Longest conversation, in bytes of the tiny model's chat template (its context is 128 tokens). */
const MAX_TEMPLATE_BYTES = 120;

/** A deterministic generator of numbers in [0, 1) (mulberry32). */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every question with a one-digit answer: `a plus b` and `a minus b`, with its answer. */
function questions(): Array<{ question: string; answer: string }> {
  const all: Array<{ question: string; answer: string }> = [];
  for (let a = 0; a < 10; a++)
    for (let b = 0; b < 10; b++) {
      const question = (op: string) => `${WORDS[a]} ${op} ${WORDS[b]}`;
      if (a + b < 10) all.push({ question: question("plus"), answer: `${question("plus")} is ${WORDS[a + b]}.` });
      if (a - b >= 0) all.push({ question: question("minus"), answer: `${question("minus")} is ${WORDS[a - b]}.` });
    }
  return all;
}

/** Bytes of a conversation in the tiny model's chat template: BOS, `<|role|>\n`, content, EOS per message. */
function templateBytes(messages: readonly Message[]): number {
  return 1 + messages.reduce((n, m) => n + `<|${m.role}|>\n`.length + m.content.length + 1, 0);
}

/** The train and validation rows (validation questions are never asked in training). */
export function makeRows(): { train: ChatRow[]; val: ChatRow[] } {
  const next = seededRandom(7);
  const all = questions();
  // A fixed, seeded pick of held-out questions.
  const order = all.map((q) => ({ q, key: next() })).sort((x, y) => x.key - y.key);
  const held = order.slice(0, VAL_SIZE).map((o) => o.q);
  const seen = order.slice(VAL_SIZE).map((o) => o.q);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const conversation = (pool: ReadonlyArray<{ question: string; answer: string }>, turns: number): ChatRow => {
    const messages: Message[] = next() < 0.3 ? [{ role: "system", content: SYSTEM }] : [];
    for (let t = 0; t < turns; t++) {
      const q = pick(pool);
      messages.push({ role: "user", content: q.question }, { role: "assistant", content: q.answer });
    }
    return { messages };
  };
  const train: ChatRow[] = [];
  while (train.length < TRAIN_SIZE) {
    const row = conversation(seen, next() < 0.3 ? 2 : 1);
    if (templateBytes(row.messages) <= MAX_TEMPLATE_BYTES) train.push(row);
  }
  const val = held.map((q) => ({
    messages: [
      { role: "user" as const, content: q.question },
      { role: "assistant" as const, content: q.answer },
    ],
  }));
  return { train, val };
}

/** File name → JSONL content, as committed. */
export function renderFiles(): Record<string, string> {
  const { train, val } = makeRows();
  const jsonl = (rows: ChatRow[]): string => rows.map((row) => JSON.stringify(row)).join("\n") + "\n";
  return { "train.jsonl": jsonl(train), "val.jsonl": jsonl(val) };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [name, content] of Object.entries(renderFiles())) {
    writeFileSync(fileURLToPath(new URL(name, import.meta.url)), content);
  }
}
