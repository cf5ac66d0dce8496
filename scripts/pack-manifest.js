/**
 * Keeps the `prepare` script (and the two that do this) out of the packed package.json. `prepare` builds dist/ when
 * `npm ci` runs in a clone, but in a tarball it only makes every install warn about an install
 * script nexrl's users never run. `prepack` builds and strips it (`strip`); `postpack` puts the
 * file back as it was (`restore`). A pack that failed in between is repaired by the next `strip`.
 *
 * Usage: node scripts/pack-manifest.js strip|restore
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = join(root, "package.json");
const saved = join(root, "node_modules", ".cache", "nexrl-pack", "package.json");

function restore() {
  if (existsSync(saved)) renameSync(saved, manifest);
}

const [command] = process.argv.slice(2);
if (command === "strip") {
  restore();
  mkdirSync(dirname(saved), { recursive: true });
  copyFileSync(manifest, saved);
  const pkg = JSON.parse(readFileSync(manifest, "utf8"));
  // prepack and postpack go too: the tarball has no scripts/ folder for them to run.
  for (const script of ["prepare", "prepack", "postpack"]) delete pkg.scripts[script];
  writeFileSync(manifest, `${JSON.stringify(pkg, null, 2)}\n`);
} else if (command === "restore") {
  restore();
} else {
  process.stderr.write("usage: node scripts/pack-manifest.js strip|restore\n");
  process.exit(2);
}
