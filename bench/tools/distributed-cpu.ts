/**
 * CPU time per rollout of the Redis path, by process (driver, workers, redis-server), and the
 * median round time against the in-process path's (rounds alternate): the distributed suite's
 * cost scenario alone, for profiling and for the latency at fewer rollouts in flight. Run the workers
 * under the profiler with `WORKER_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=DIR"` (split at spaces) and the driver
 * with `node --cpu-prof --import tsx bench/tools/distributed-cpu.ts`.
 *
 * ```sh
 * npm run build && npx tsx bench/tools/distributed-cpu.ts [in-flight=256] [workers=4] [rounds=6] [delay-ms=1000]
 * ```
 */
import { cpuParts, type CpuParts } from "../distributed/cpu.js";
import { redisRolloutBench } from "../distributed/driver.js";
import { writeBenchRecipe } from "../distributed/recipe.js";
import { startRedis } from "../distributed/redis-server.js";
import { startWorkers } from "../distributed/workers.js";
import { runFingerprint } from "../../dist/distributed/fingerprint.js";
import { tokenizerName } from "../../dist/run/preflight.js";
import { loadRecipe } from "../../dist/recipe/index.js";
import { rolloutBench, startLoopbackServer } from "../pipeline/rollout.js";

const [inFlight = 256, workerCount = 4, rounds = 6, delayMs = 1000] = process.argv.slice(2).map(Number);
const requests = inFlight * 2;
const redis = await startRedis();
const recipe = await writeBenchRecipe({ redisUrl: redis.url });
const server = await startLoopbackServer(delayMs);
const workerOptions = process.env.WORKER_NODE_OPTIONS;
const workers = startWorkers({
  recipe: recipe.file,
  redisUrl: redis.url,
  streamPrefix: "bench-cpu",
  count: workerCount,
  concurrency: inFlight / workerCount,
  cwd: recipe.dir,
  ...(workerOptions !== undefined && { nodeOptions: workerOptions.split(" ") }),
});
const { config } = await loadRecipe(recipe.file, { env: {}, cwd: recipe.dir });
const inProcess = rolloutBench(server.baseUrl, config, inFlight, requests);
const inProcessMs: number[] = [];
const driver = await redisRolloutBench({
  baseUrl: server.baseUrl,
  redisUrl: redis.url,
  streamPrefix: "bench-cpu",
  slots: inFlight,
  requests,
  fingerprint: await runFingerprint(config, recipe.dir, tokenizerName(config)),
});
const samples: Array<CpuParts & { ms: number }> = [];
try {
  await driver.waitForWorkers(workerCount);
  for (let round = -1; round < rounds; round++) {
    const local = performance.now();
    await inProcess.pipeline();
    if (round >= 0) inProcessMs.push(performance.now() - local);
    const before = cpuParts(workers.pids, redis.pid);
    const start = performance.now();
    await driver.batch();
    const ms = performance.now() - start;
    const after = cpuParts(workers.pids, redis.pid);
    // Round -1 warms up.
    if (round >= 0)
      samples.push({
        ms,
        driver: (after.driver - before.driver) / requests,
        workers: (after.workers - before.workers) / requests,
        redis: (after.redis - before.redis) / requests,
      });
  }
} catch (error) {
  console.error(workers.output());
  throw error;
} finally {
  await driver.close();
  await inProcess.close();
  await workers.stop();
  await server.close();
  await recipe.remove();
  await redis.close();
}
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const part of ["ms", "driver", "workers", "redis"] as const)
  console.log(
    `${part.padEnd(8)} ${median(samples.map((s) => s[part])).toFixed(3)} (${samples.map((s) => s[part].toFixed(2)).join(" ")})`,
  );
console.log(`total    ${median(samples.map((s) => s.driver + s.workers + s.redis)).toFixed(3)} ms CPU per rollout`);
const added = median(samples.map((s) => s.ms)) - median(inProcessMs);
console.log(
  `in-process round ${median(inProcessMs).toFixed(1)} ms; added per rollout (Little's law) ${((inFlight * added) / requests).toFixed(1)} ms`,
);
