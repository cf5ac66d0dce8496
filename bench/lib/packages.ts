/**
 * A benchmark's own npm packages (a baseline such as tfjs or BullMQ), kept in a folder of the
 * bench with a committed lock file and installed on first use; never dependencies of nexrl.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

/**
 * Installs `dir`'s packages from its lock file (`npm ci --prefix DIR`) unless `probe`, a package
 * folder under its `node_modules`, is there already.
 */
export function ensureBenchPackages(dir: string, probe: string, what: string, log: (message: string) => void): void {
  if (existsSync(path.join(dir, "node_modules", probe, "package.json"))) return;
  log(`installing ${what} (npm ci --prefix ${path.relative(process.cwd(), dir) || dir})`);
  execFileSync("npm", ["ci", "--prefix", dir, "--no-audit", "--no-fund"], {
    stdio: ["ignore", "inherit", "inherit"],
    shell: process.platform === "win32",
  });
}
