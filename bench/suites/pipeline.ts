/**
 * The pipeline's own cost, each row against the limit of this machine measured in the same run:
 * Tinker request encoding against `JSON.stringify`, rollouts against a bare undici loop (at a
 * loopback server's answer delays of 20 ms, 100 ms and 1 s), the overlap of rollouts and
 * training against its ideal, the trajectory pool's memory per token, the data loader's memory
 * per row against the data file's size, the CLI's start-up against Node's, and the agent
 * gateway's cost per call in the Responses API against chat completions.
 */
import { fork } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadRecipe } from "../../dist/recipe/index.js";
import { dataMemory, writePromptFile } from "../pipeline/data-file.js";
import { gatewayDialectBench } from "../pipeline/gateway-dialects.js";
import { encodingBench, LOSS_FN } from "../pipeline/encoding.js";
import { stepMs, timerStepMs } from "../pipeline/overlap.js";
import { inferenceLayers, rolloutBench, startLoopbackServer } from "../pipeline/rollout.js";
import { CLI, nodeRun } from "../pipeline/startup.js";
import { comparedRow, targetRow, type Row, type Suite } from "../lib/suite.js";
import { median, sideBySide, type Contender } from "../lib/timing.js";

/** Row 1: trajectory lengths, and tokens encoded per timed call. */
const ENCODE_LENGTHS = [1_000, 10_000, 100_000];
const ENCODE_TOKENS_PER_CALL = 200_000;
const ENCODE = { warmup: 3, runs: 21 };
/**
 * Row 2: for each answer delay of the loopback server, the concurrencies, rollouts per timed call
 * (per unit of concurrency), rounds and target. 20 ms is far quicker than a real service and
 * leaves the client's CPU as the limit; 100 ms and 1 s are real services' answer times (fewer
 * rounds of fewer rollouts at 1 s, where a round takes seconds).
 */
const ROLLOUT_LATENCIES = [
  { delayMs: 20, concurrencies: [64, 256, 1024], perWorker: 8, rounds: { warmup: 2, runs: 9 }, bound: 0.8 },
  { delayMs: 100, concurrencies: [256, 1024], perWorker: 8, rounds: { warmup: 1, runs: 5 }, bound: 0.95 },
  { delayMs: 1000, concurrencies: [256, 1024], perWorker: 3, rounds: { warmup: 1, runs: 3 }, bound: 0.95 },
];
/** The 20 ms rows keep their first names; the others name their delay. */
const rolloutRowName = (delayMs: number, concurrency: number): string =>
  delayMs === 20
    ? `rollouts_concurrency_${concurrency}`
    : `rollouts_${delayMs >= 1000 ? `${delayMs / 1000}s` : `${delayMs}ms`}_concurrency_${concurrency}`;
/** Delay and concurrency at which the layers under the rollouts are timed too (in `setup`, no row). */
const LAYERS = { delayMs: 20, concurrency: 256, warmup: 1, runs: 3 };
/** Row 3: rollout batch and training step times, and rounds (each mode, pipeline and bare timers in alternation). */
const OVERLAP = { rolloutMs: 200, trainMs: 200 };
const OVERLAP_RUNS = 3;
/** Row 4: tokens in each half of the pool fill, tokens per trajectory. */
const POOL_TOKENS = 2_000_000;
const POOL_TRAJECTORY_TOKENS = 1_000;
/** Row 5: rows of the generated data file. */
const DATA_ROWS = 1_000_000;
/** Row 6: fresh processes per contender. */
const STARTUP = { warmup: 2, runs: 15 };
/** Row 7: tool episodes (2 calls each) per timed call, rounds, and the bound (within 1.1× the cost of chat completions). */
const GATEWAY = { episodes: 20, warmup: 2, runs: 9, bound: 0.91 };
// A recipe that passes: validate runs every start-up check of a run (math/local.yaml needs its SFT stage first).
const VALIDATE_RECIPE = "recipe/pig_latin/local.yaml";

/** Wraps a contender to count the page faults it causes (first touches of fresh memory). */
function countingFaults(contender: Contender): { contender: Contender; faults: () => number } {
  let faults = 0;
  let calls = 0;
  return {
    contender: async () => {
      const before = process.resourceUsage().minorPageFault;
      const units = await contender();
      faults += process.resourceUsage().minorPageFault - before;
      calls++;
      return units;
    },
    faults: () => Math.round(faults / calls),
  };
}

/**
 * Wraps a contender to record the CPU time (`process.cpuUsage()`, user + system, the garbage
 * collector's threads included) of each call per unit of work, in microseconds.
 */
function countingCpu(contender: Contender): { contender: Contender; perUnitUs: number[] } {
  const perUnitUs: number[] = [];
  return {
    contender: async () => {
      const before = process.cpuUsage();
      const units = await contender();
      const used = process.cpuUsage(before);
      perUnitUs.push((used.user + used.system) / units);
      return units;
    },
    perUnitUs,
  };
}

/** RSS readings of `pool-rss-child.ts`, forked with --expose-gc. */
function poolRss(): Promise<{ emptyMb: number; halfMb: number; fullMb: number; tokens: number }> {
  const script = fileURLToPath(new URL("../pipeline/pool-rss-child.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    // fork() reuses this process's execArgv, which carries tsx's loader flags.
    const child = fork(script, [String(POOL_TOKENS), String(POOL_TRAJECTORY_TOKENS)], {
      execArgv: [...process.execArgv, "--expose-gc"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let result: { emptyMb: number; halfMb: number; fullMb: number; tokens: number } | undefined;
    child.on("message", (m: typeof result) => (result = m));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 && result ? resolve(result) : reject(new Error(`pool RSS child exited with code ${code}`)),
    );
  });
}

export const suite: Suite = {
  description:
    "the pipeline's own cost: encoding vs JSON.stringify, rollouts vs bare undici, rollout/training overlap, pool memory, data loader memory, CLI start-up, the gateway's Responses API vs chat completions",
  async *run(ctx): AsyncIterable<Row> {
    const samplesMs: Record<string, Record<string, number[]>> = {};
    ctx.setup("samples_ms", samplesMs);

    // 1. Tinker request encoding (and, for the record, datum building).
    const faults: Record<string, { ours: number; limit: number }> = {};
    const bytes: Record<string, number> = {};
    const datumMs: Record<string, number> = {};
    ctx.setup("encode", {
      loss: LOSS_FN,
      ours: "TinkerTrainingClient.forwardBackward of datums built by trajectoryToDatum before the timed calls: loss-contract checks, chunking, JSON.stringify",
      baseline: "JSON.stringify of the same request bodies, parsed back into plain objects once",
      request:
        "one forward_backward request per trajectory, with the network cut off once the client has serialised the body",
      tokens_per_call: ENCODE_TOKENS_PER_CALL,
      ...ENCODE,
      body_bytes_per_call: bytes,
      page_faults_per_call: faults,
      datum_build_ms_per_call: datumMs,
    });
    for (const length of ENCODE_LENGTHS) {
      const name = `encode_${length / 1000}k_token_trajectories`;
      ctx.log(`${name}: timing`);
      const bench = await encodingBench(ENCODE_TOKENS_PER_CALL / length, length);
      try {
        const ours = countingFaults(() => bench.ours());
        const limit = countingFaults(() => bench.limit());
        const t = await sideBySide({ ours: ours.contender, limit: limit.contender }, ENCODE);
        // Timed apart: the garbage of fresh datums would land on the other contenders' rounds.
        const d = await sideBySide({ datums: () => bench.datums() }, ENCODE);
        samplesMs[name] = { ours: t.ours.samplesMs, limit: t.limit.samplesMs, datums: d.datums.samplesMs };
        faults[name] = { ours: ours.faults(), limit: limit.faults() };
        bytes[name] = bench.bytes;
        datumMs[name] = d.datums.medianMs;
        yield comparedRow(name, "tokens/s", t.ours.perSecond, t.limit.perSecond, { op: ">=", bound: 0.8 });
      } finally {
        await bench.close();
      }
    }

    // 2. Rollout throughput, at each answer delay of the loopback server.
    // Workers are given the parsed recipe; this one is never run.
    const { config } = await loadRecipe(fileURLToPath(new URL("../../recipe/math/local.yaml", import.meta.url)), {
      env: {},
    });
    // Where the client's CPU is the limit, the rows' ratio is the ratio of CPU time per rollout:
    // recorded with the machine's load while each row was timed, to tell the two apart.
    const cpuUs: Record<string, { pipeline: number; bare: number; bare_over_pipeline: number }> = {};
    const load: Record<string, { start: number; end: number }> = {};
    ctx.setup("rollouts", {
      server: "node:http in a child process on 127.0.0.1, answering after a fixed delay",
      ours: "a DataLoader batch through RolloutScheduler, RolloutRunner (a worker making one OpenAIInferenceClient.completion) and TrajectoryPool",
      baseline: "undici Pool.request loops, one per unit of concurrency, reading each JSON answer",
      rollouts_per_call: "rollouts per worker × concurrency",
      latencies: ROLLOUT_LATENCIES,
      cpu_us_per_rollout:
        "median over the timed rounds of process.cpuUsage() (user + system, garbage-collector threads included) per rollout",
      cpu_us_per_rollout_by_row: cpuUs,
      load_average_1min_by_row: load,
    });
    for (const { delayMs, concurrencies, perWorker, rounds, bound } of ROLLOUT_LATENCIES) {
      const server = await startLoopbackServer(delayMs);
      try {
        for (const concurrency of concurrencies) {
          const name = rolloutRowName(delayMs, concurrency);
          ctx.log(`${name}: timing`);
          const bench = rolloutBench(server.baseUrl, config, concurrency, perWorker * concurrency);
          try {
            const pipelineCpu = countingCpu(() => bench.pipeline());
            const bareCpu = countingCpu(() => bench.bare());
            const start = loadavg()[0]!;
            const t = await sideBySide({ pipeline: pipelineCpu.contender, bare: bareCpu.contender }, rounds);
            load[name] = { start, end: loadavg()[0]! };
            // The warm-up rounds come first.
            const timed = (perUnitUs: number[]) => median(perUnitUs.slice(rounds.warmup));
            cpuUs[name] = {
              pipeline: timed(pipelineCpu.perUnitUs),
              bare: timed(bareCpu.perUnitUs),
              bare_over_pipeline: timed(bareCpu.perUnitUs) / timed(pipelineCpu.perUnitUs),
            };
            samplesMs[name] = { pipeline: t.pipeline.samplesMs, bare: t.bare.samplesMs };
            yield comparedRow(name, "rollouts/s", t.pipeline.perSecond, t.bare.perSecond, { op: ">=", bound });
            if (delayMs === LAYERS.delayMs && concurrency === LAYERS.concurrency) {
              ctx.log(`rollout layers at concurrency ${concurrency}: timing`);
              const layers = inferenceLayers(server.baseUrl, concurrency, perWorker * concurrency);
              const l = await sideBySide(
                { bare: () => bench.bare(), ...layers.contenders, pipeline: () => bench.pipeline() },
                LAYERS,
              ).finally(() => layers.close());
              ctx.setup(
                `rollout_layers_per_s_concurrency_${concurrency}`,
                Object.fromEntries(Object.entries(l).map(([layer, timing]) => [layer, Math.round(timing.perSecond)])),
              );
            }
          } finally {
            await bench.close();
          }
        }
      } finally {
        await server.close();
      }
    }

    // 3. Overlap of rollouts and training, against the same timers alone, in alternation.
    const nominal = { sync: OVERLAP.rolloutMs + OVERLAP.trainMs, async: Math.max(OVERLAP.rolloutMs, OVERLAP.trainMs) };
    const steps = {
      pipeline_sync: [] as number[],
      timers_sync: [] as number[],
      pipeline_async: [] as number[],
      timers_async: [] as number[],
    };
    for (let i = 0; i < OVERLAP_RUNS; i++) {
      ctx.log(`overlap: round ${i + 1} of ${OVERLAP_RUNS}`);
      for (const [mode, key] of [
        ["sync", "sync"],
        ["batch-async", "async"],
      ] as const) {
        const pipeline = () => stepMs(mode, OVERLAP).then((ms) => void steps[`pipeline_${key}`].push(ms));
        const timers = () => timerStepMs(mode, OVERLAP).then((ms) => void steps[`timers_${key}`].push(ms));
        for (const run of i % 2 === 0 ? [pipeline, timers] : [timers, pipeline]) await run();
      }
    }
    samplesMs.overlap_step = steps;
    const overlap = { sync: median(steps.pipeline_sync), async: median(steps.pipeline_async) };
    ctx.setup("overlap", {
      ...OVERLAP,
      rounds: OVERLAP_RUNS,
      driver: "executeRun (the loop runRecipe runs) with FakeTrainingService",
      async: "weight.sync_mode batch-async, staleness_threshold 1",
      baseline: "the same timers with nothing around them: R then T (sync), R and T at once (async)",
      nominal_ms: nominal,
      ratio_to_nominal: { sync: overlap.sync / nominal.sync, async: overlap.async / nominal.async },
    });
    yield comparedRow("step_async_staleness_1", "ms/step", overlap.async, median(steps.timers_async), {
      op: "<=",
      bound: 1.1,
    });
    yield comparedRow("step_sync", "ms/step", overlap.sync, median(steps.timers_sync), { op: "<=", bound: 1.05 });

    // 4. Memory held in the trajectory pool.
    ctx.log("pool_rss_per_million_tokens: child process");
    const rss = await poolRss();
    ctx.setup("pool_rss", {
      ...rss,
      trajectory_tokens: POOL_TRAJECTORY_TOKENS,
      measure:
        "RSS growth while the second half of the tokens fills the pool (the first half also pays the young generation's growth)",
    });
    yield targetRow("pool_rss_per_million_tokens", "MB", (rss.fullMb - rss.halfMb) / (rss.tokens / 1e6), {
      op: "<=",
      bound: 40,
    });

    // 5. Memory of the data loader per row, against the file's own bytes per row.
    ctx.log(`data_loader_bytes_per_row: writing ${DATA_ROWS} rows, then a child process each`);
    const dataDir = await mkdtemp(path.join(tmpdir(), "nexrl-bench-data-"));
    try {
      const file = path.join(dataDir, "prompts.jsonl");
      await writePromptFile(file, DATA_ROWS);
      const loader = await dataMemory("loader", file, DATA_ROWS);
      const objects = await dataMemory("objects", file, DATA_ROWS);
      const perRow = (bytes: number) => bytes / DATA_ROWS;
      const fileBytesPerRow = perRow(loader.fileBytes);
      ctx.setup("data_loader", {
        rows: DATA_ROWS,
        file: "JSON Lines, {prompt, ground_truth, id} arithmetic prompts",
        file_bytes_per_row: fileBytesPerRow,
        measure:
          "DataLoader.fromFiles and its first batch (which draws the epoch order) in a fresh process: heap used + external after full collections, and peak RSS over the RSS before loading",
        loader: {
          retained_bytes_per_row: perRow(loader.retainedBytes),
          peak_rss_bytes_per_row: perRow(loader.peakRssBytes - loader.baseRssBytes),
          load_ms: loader.loadMs,
        },
        parsed_objects_for_comparison: {
          retained_bytes_per_row: perRow(objects.retainedBytes),
          peak_rss_bytes_per_row: perRow(objects.peakRssBytes - objects.baseRssBytes),
          load_ms: objects.loadMs,
        },
      });
      yield comparedRow("data_loader_bytes_per_row", "B/row", perRow(loader.retainedBytes), fileBytesPerRow, {
        op: "<=",
        bound: 1.5,
      });
      yield comparedRow(
        "data_loader_peak_rss_per_row",
        "B/row",
        perRow(loader.peakRssBytes - loader.baseRssBytes),
        fileBytesPerRow,
        { op: "<=", bound: 2 },
      );
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }

    // 6. Start-up.
    ctx.setup("startup", STARTUP);
    ctx.log("cli_help: timing");
    const t = await sideBySide(
      {
        help: nodeRun([CLI, "--help"]),
        node: nodeRun(["-e", "0"]),
        validate: nodeRun([CLI, "validate", "-c", VALIDATE_RECIPE]),
      },
      STARTUP,
    );
    samplesMs.startup = { help: t.help.samplesMs, node: t.node.samplesMs, validate: t.validate.samplesMs };
    ctx.setup("validate_ms", {
      recipe: VALIDATE_RECIPE,
      median: t.validate.medianMs,
      ratio_to_node: t.validate.medianMs / t.node.medianMs,
    });
    ctx.log(
      `nexrl validate -c ${VALIDATE_RECIPE}: ${t.validate.medianMs.toFixed(0)} ms (${(t.validate.medianMs / t.node.medianMs).toFixed(2)} × node -e 0; no target)`,
    );
    yield comparedRow("cli_help", "ms", t.help.medianMs, t.node.medianMs, { op: "<=", bound: 3 });

    // 7. The agent gateway's cost per call in each dialect, the same tool episode sent both ways.
    ctx.setup("gateway_dialects", {
      episode:
        "2 calls: the policy (answering at once) calls a tool, the agent sends the result back with the whole conversation, the policy answers",
      baseline: "the episode as chat completions; ours: as Responses items (function_call, function_call_output)",
      ...GATEWAY,
    });
    ctx.log("gateway_responses_calls: timing");
    const gateway = await gatewayDialectBench(GATEWAY.episodes);
    try {
      const d = await sideBySide(gateway.contenders, GATEWAY);
      samplesMs.gateway_dialects = { chat: d.chat.samplesMs, responses: d.responses.samplesMs };
      yield comparedRow("gateway_responses_calls", "calls/s", d.responses.perSecond, d.chat.perSecond, {
        op: ">=",
        bound: GATEWAY.bound,
      });
    } finally {
      await gateway.close();
    }
  },
};
