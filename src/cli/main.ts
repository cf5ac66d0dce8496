#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { redactText } from "../recipe/redact.js";
import { EXIT_CODES } from "./args.js";
import { runCli } from "./run.js";

const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

// A signal ends the command, unless the command handles it itself (a run stops after the step in
// flight, `serve` closes its server).
for (const [signal, code] of [
  ["SIGINT", EXIT_CODES.interrupted],
  ["SIGTERM", EXIT_CODES.terminated],
] as const) {
  process.on(signal, () => {
    if (process.listenerCount(signal) === 1) process.exit(code);
  });
}
// An error user code throws or rejects with outside a run (a TS recipe's module, say) ends the
// command as a failed run, not with Node's exit code 1, which means an invalid recipe here. While
// a run goes, it handles these itself (a second listener is then installed).
for (const event of ["uncaughtException", "unhandledRejection"] as const) {
  process.on(event, (error: unknown) => {
    if (process.listenerCount(event) > 1) return;
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`nexrl: an uncaught error in code nexrl ran\n${redactText(text, process.env)}\n`);
    process.exit(EXIT_CODES.runFailed);
  });
}
const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  version,
});

/** Resolves once what was written to `stream` has been handed to the system. */
const flushed = (stream: NodeJS.WriteStream): Promise<void> =>
  new Promise((resolve) => stream.write("", () => resolve()));

// The command is over: whatever is still pending belongs to user code the run left behind (an
// agent cut off by its timeout, a rollout given up as hung), and must not keep the process alive.
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
