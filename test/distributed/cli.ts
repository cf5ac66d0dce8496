/** Child processes of the real CLI (`dist/cli/main.js`) for the distributed tests. */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const main = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

/** A running CLI process with its output so far. */
export interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
}

/** Starts `nexrl ARGS` in `cwd`. */
export function startCli(args: string[], cwd: string, env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [main, ...args], {
    cwd,
    env: { ...process.env, NEXRL_DEBUG: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk));
  child.stderr!.on("data", (chunk: Buffer) => (err += chunk));
  const exited = new Promise<number | string>((resolve) =>
    child.on("close", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Resolves once `check` is true, polling. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  exited?: Promise<unknown>,
): Promise<void> {
  let gone = false;
  void exited?.then(() => (gone = true));
  while (!(await check())) {
    if (gone) throw new Error(`the process exited before ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
