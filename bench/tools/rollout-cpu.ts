/**
 * CPU time per rollout of the pipeline against the bare undici loop, less sensitive to load from
 * other work on the machine than the wall-clock ratios of the pipeline suite: both contenders
 * alternate in one process against the 20 ms loopback server, and each round's
 * `process.cpuUsage()` (user + system) is divided by its rollouts.
 *
 * ```sh
 * npm run build && npx tsx bench/tools/rollout-cpu.ts [concurrency=256] [rounds=6] [per-worker=8]
 * ```
 */
import { fileURLToPath } from "node:url";
import { loadRecipe } from "../../dist/recipe/index.js";
import { rolloutBench, startLoopbackServer } from "../pipeline/rollout.js";

const [concurrency = 256, rounds = 6, perWorker = 8] = process.argv.slice(2).map(Number);
const { config } = await loadRecipe(fileURLToPath(new URL("../../recipe/math/local.yaml", import.meta.url)), {
  env: {},
});
const server = await startLoopbackServer(20);
const bench = rolloutBench(server.baseUrl, config, concurrency, perWorker * concurrency);
const contenders = { pipeline: bench.pipeline, bare: bench.bare };
const samples: Record<string, number[]> = { pipeline: [], bare: [] };
try {
  for (let round = -1; round < rounds; round++) {
    const order = Object.entries(contenders);
    if (round % 2 === 1) order.reverse();
    for (const [name, run] of order) {
      const start = process.cpuUsage();
      const count = await run();
      const used = process.cpuUsage(start);
      // Round -1 warms up both.
      if (round >= 0) samples[name]!.push((used.user + used.system) / count);
    }
  }
} finally {
  await bench.close();
  await server.close();
}
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const [name, values] of Object.entries(samples))
  console.log(
    `${name.padEnd(9)} ${median(values).toFixed(1)} µs CPU per rollout (median of ${values.length}; ${values.map((v) => v.toFixed(0)).join(" ")})`,
  );
// Each round's pair ran back to back, so its ratio is the least disturbed by load from elsewhere.
const ratios = samples.bare!.map((bare, i) => bare / samples.pipeline![i]!);
console.log(`bare / pipeline: ${median(ratios).toFixed(3)} (median of the rounds' ratios)`);
