/**
 * `npm run bench [-- suite...]`: runs the named suites (all of `bench/suites/*.ts` by default)
 * against `dist/` (rebuilt first when stale), writes `bench/results/<suite>.json` for each and
 * prints the rows as a table.
 *
 * Missing a target is a finding, not a failure: the exit code is 0 whenever every suite ran, and
 * non-zero only when something crashed or a suite name is unknown.
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildIfStale } from "./lib/build.js";
import { machineInfo } from "./lib/machine.js";
import { formatNumber, formatTable, writeResult, type SuiteResult } from "./lib/report.js";
import type { Row, Suite } from "./lib/suite.js";

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const suitesDir = path.join(benchDir, "suites");
const resultsDir = path.join(benchDir, "results");

async function availableSuites(): Promise<string[]> {
  const files = await readdir(suitesDir);
  return files
    .filter((f) => f.endsWith(".ts"))
    .map((f) => f.slice(0, -3))
    .sort();
}

async function loadSuite(name: string): Promise<Suite> {
  const mod = (await import(pathToFileURL(path.join(suitesDir, `${name}.ts`)).href)) as { suite?: Suite };
  if (mod.suite === undefined) throw new Error(`bench/suites/${name}.ts does not export \`suite\``);
  return mod.suite;
}

async function main(argv: string[]): Promise<number> {
  const available = await availableSuites();
  const requested = argv.length > 0 ? argv : available;
  const unknown = requested.filter((n) => !available.includes(n));
  if (unknown.length > 0) {
    console.error(
      `unknown suite${unknown.length > 1 ? "s" : ""}: ${unknown.join(", ")}\navailable suites: ${available.join(", ")}`,
    );
    return 2;
  }

  const log = (message: string) => console.error(`  ${message}`);
  if (await buildIfStale()) log("rebuilt dist/ (it was missing, or older than a file in src/)");
  let met = 0;
  let total = 0;
  for (const name of requested) {
    const suite = await loadSuite(name);
    console.error(`suite ${name}: ${suite.description}`);
    const result: SuiteResult = {
      suite: name,
      date: new Date().toISOString(),
      machine: machineInfo(),
      setup: {},
      rows: [],
    };
    const notes: string[] = [];
    const ctx = {
      log,
      setup: (key: string, value: unknown) => void (result.setup[key] = value),
      note: (message: string) => (log(message), void notes.push(message)),
    };
    for await (const row of suite.run(ctx)) {
      result.rows.push(row);
      log(
        `${row.name}: ${formatNumber(row.value)} ${row.unit}` +
          (row.ratio === null ? " (reported, no target)" : `, ratio ${row.ratio.toFixed(3)} (target ${row.target})`),
      );
    }
    const file = await writeResult(resultsDir, result, suite.resultName?.());
    console.log(`\n${name} (${path.relative(process.cwd(), file)})\n${formatTable(result.rows)}`);
    for (const message of notes) console.log(`note: ${message}`);
    met += result.rows.filter((r: Row) => r.met === true).length;
    total += result.rows.filter((r: Row) => r.met !== null).length;
  }
  console.log(`\n${met} of ${total} rows met`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
