/**
 * Where the `nexrl` command reads and writes, in its own module so that each command imports it
 * without importing the dispatcher that imports the commands.
 * @module
 */

/** Where the CLI reads and writes; the real process in `main.ts`, buffers in tests. */
export interface CliIO {
  /** Receives results: help, the resolved recipe, the plan (a live progress line when `isTTY`). */
  stdout: { write(text: string): unknown; isTTY?: boolean };
  /** Receives errors and warnings. */
  stderr: { write(text: string): unknown };
  /** Environment for `${oc.env:...}` and for secret redaction. */
  env: Record<string, string | undefined>;
  /** Folder relative paths resolve from. */
  cwd: string;
  /** The package version. */
  version: string;
  /** Where `nexrl sample` reads prompts when none is given (default: the process's standard input). */
  stdin?: AsyncIterable<string | Buffer> & { isTTY?: boolean };
}
