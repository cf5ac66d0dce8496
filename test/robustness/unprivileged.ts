/**
 * Running the built CLI as an unprivileged user, for the tests whose point is a permission root
 * does not have (a read-only folder, a privileged port).
 */
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../..");
/** `nobody` on Debian and most Linux systems. */
const NOBODY = { uid: 65534, gid: 65534 };

/** The user to run a child as, or why the test cannot run here. */
export type Unprivileged = { uid: number; gid: number } | { skip: string };

let probed: Unprivileged | undefined;

/**
 * `nobody` when this process is root and `nobody` can run this checkout's built CLI; the current
 * user when it is not root (it has no privilege to drop). A checkout under a private folder (root's
 * home, a `mktemp -d` folder) is not readable by `nobody`: then the reason to skip, said plainly.
 */
export function unprivilegedUser(): Unprivileged {
  if (probed) return probed;
  const uid = process.getuid?.();
  if (uid === undefined) return (probed = { skip: "this platform has no user ids" });
  if (uid !== 0) return (probed = { uid, gid: process.getgid?.() ?? uid });
  const run = spawnSync(process.execPath, [join(ROOT, "dist/cli/main.js"), "--version"], {
    ...NOBODY,
    cwd: tmpdir(),
    encoding: "utf8",
  });
  if (run.status === 0) return (probed = NOBODY);
  // Node's "Error: Cannot find module …" line, not the loader's source location above it.
  const lines = (run.stderr || run.error?.message || `exit ${run.status}`).trim().split("\n");
  const why = lines.find((line) => /Error/.test(line)) ?? lines[0];
  return (probed = {
    skip: `the test must run the CLI as nobody (uid 65534), which cannot read this checkout (${ROOT}): a folder above it is private, as root's home or a mktemp -d folder is (${why}); clone it under a folder others can read to run this part`,
  });
}
