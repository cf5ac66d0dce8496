/**
 * The benchmarks measure the compiled package in `dist/`, which is what `npm i nexrl` and the
 * CLI run, not the TypeScript sources under tsx, which keeps function names with one
 * `Object.defineProperty` per named closure it creates (see bench/README.md).
 */
import { execFileSync } from "node:child_process";
import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));

async function newestMtime(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith(".ts"))
      newest = Math.max(newest, (await stat(path.join(entry.parentPath, entry.name))).mtimeMs);
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
