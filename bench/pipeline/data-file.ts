/**
 * Helpers of the data-loading row of the pipeline suite: a large generated JSON Lines prompt file,
 * and the memory readings of `data-memory-child.ts`.
 */
import { fork } from "node:child_process";
import { createWriteStream } from "node:fs";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

/** Writes `rows` arithmetic prompts in the shape of a typical RL prompt file (about 97 bytes a row). */
export async function writePromptFile(file: string, rows: number): Promise<void> {
  const out = createWriteStream(file);
  let text = "";
  for (let i = 0; i < rows; i++) {
    const a = (i * 7919) % 10_000;
    const b = (i * 104_729) % 10_000;
    text += `${JSON.stringify({ prompt: `What is ${a} + ${b}? Answer with the number only.`, ground_truth: String(a + b), id: i })}\n`;
    if (text.length > 1 << 20) {
      if (!out.write(text)) await once(out, "drain");
      text = "";
    }
  }
  out.end(text);
  await once(out, "finish");
}

/** What `data-memory-child.ts` reports. */
export interface DataMemory {
  rows: number;
  fileBytes: number;
  retainedBytes: number;
  peakRssBytes: number;
  baseRssBytes: number;
  loadMs: number;
}

/** Runs `data-memory-child.ts` in `mode` (`loader` or `objects`) on `file` in a fresh process with --expose-gc. */
export function dataMemory(mode: "loader" | "objects", file: string, rows: number): Promise<DataMemory> {
  const script = fileURLToPath(new URL("./data-memory-child.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    // fork() reuses this process's execArgv, which carries tsx's loader flags.
    const child = fork(script, [mode, file, String(rows)], {
      execArgv: [...process.execArgv, "--expose-gc"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let result: DataMemory | undefined;
    child.on("message", (m: DataMemory) => (result = m));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 && result ? resolve(result) : reject(new Error(`data memory child exited with code ${code}`)),
    );
  });
}
