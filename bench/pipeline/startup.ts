/**
 * Row 5 of the pipeline suite: wall time of the built CLI (`dist/cli/main.js`) against `node -e 0`,
 * each a fresh process, in alternation. `dist` is rebuilt first when any `src` file is newer.
 */
import { execFileSync } from "node:child_process";
import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
/** The built CLI. */
export const CLI = path.join(root, "dist", "cli", "main.js");

async function newestMtime(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith(".ts")) newest = Math.max(newest, (await stat(path.join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

/** Rebuilds `dist` (`npm run build`) when a source file is newer than the last build; returns whether it did. */
export async function buildIfStale(): Promise<boolean> {
  const built = await stat(path.join(root, "dist", ".tsbuildinfo")).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  if (built >= (await newestMtime(path.join(root, "src")))) return false;
  execFileSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
  return true;
}

/** A contender for `sideBySide`: runs `node ...args` to its end (exit code 0 required) in the repository root. */
export function nodeRun(args: readonly string[]): () => number {
  return () => {
    execFileSync(process.execPath, args, { cwd: root, stdio: "ignore", timeout: 60_000 });
    return 1;
  };
}
