/**
 * Row 5 of the pipeline suite: wall time of the built CLI (`dist/cli/main.js`) against `node -e 0`,
 * each a fresh process, in alternation.
 */
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
/** The built CLI. */
export const CLI = path.join(root, "dist", "cli", "main.js");

/** A contender for `sideBySide`: runs `node ...args` to its end (exit code 0 required) in the repository root. */
export function nodeRun(args: readonly string[]): () => number {
  return () => {
    execFileSync(process.execPath, args, { cwd: root, stdio: "ignore", timeout: 60_000 });
    return 1;
  };
}
