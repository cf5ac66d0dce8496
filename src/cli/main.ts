#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { runCli } from "./run.js";

const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

process.on("SIGINT", () => process.exit(130));
process.exitCode = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  version,
});
