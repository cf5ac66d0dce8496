/**
 * `nexrl worker`: runs the rollouts of a distributed run (`rollout_worker.distributed`) — the
 * recipe's rollout worker (and agent) loaded as the driver loads it, tasks taken from the run's
 * Redis server until SIGTERM or Ctrl-C, which hand back the tasks in flight and exit 0. A worker
 * whose recipe's fingerprint differs from the one the run's driver published fails with a
 * `ConfigError` naming the differences, having run none of the driver's tasks.
 * @module
 */
import type { TaskSampling } from "../distributed/messages.js";
import type { LoadedRecipe } from "../recipe/load.js";
import { distributedSchema, type DistributedOptions } from "../recipe/schema/rollout-worker.js";
import { EXIT_CODES, type WorkerCommand } from "./args.js";
import type { CliIO } from "./io.js";
import { ConfigError, UserCodeError } from "../errors.js";

/** The distributed settings of the worker: the recipe's, with `--redis` for the URL. */
function distributedSettings(recipe: LoadedRecipe, redis: string | undefined): DistributedOptions {
  const settings = recipe.config.rollout_worker.distributed;
  if (!settings && redis === undefined)
    throw new ConfigError(
      `${recipe.path} has no rollout_worker.distributed and no --redis URL was given: a worker takes its tasks from the Redis server of a distributed run; pass --redis redis://host:port or set rollout_worker.distributed in the recipe`,
    );
  const parsed = distributedSchema.safeParse({ ...(settings ?? { engine: "redis" }), ...(redis && { url: redis }) });
  if (!parsed.success)
    throw new ConfigError(
      `--redis: ${parsed.error.issues[0]?.message ?? "not a Redis URL"} (redis://[[user]:password@]host[:port][/db])`,
    );
  return parsed.data;
}

/**
 * Runs `nexrl worker` until SIGTERM, SIGINT or `stopped` resolves (then it hands back the tasks in
 * flight); returns the exit code.
 */
export async function runWorker(
  command: WorkerCommand,
  io: CliIO,
  load: (configPath: string, overrides: string[]) => Promise<LoadedRecipe>,
  stopped?: Promise<void>,
): Promise<number> {
  const recipe = await load(command.configPath, command.overrides);
  const settings = distributedSettings(recipe, command.redis);
  const { config } = recipe;
  const concurrency = command.concurrency ?? config.rollout_worker.num_workers;
  const [
    { resolveRolloutWorkerClass, rolloutWorkerOptions },
    { loadTokenizer },
    { tokenizerName, tokenizerOptions },
    { createRunner },
  ] = await Promise.all([
    import("../workers/registry.js"),
    import("../inference/tokenizers/load.js"),
    import("../run/preflight.js"),
    import("../run/setup.js"),
  ]);
  const [
    { connectRedis, StreamKeys },
    { serverName },
    { WorkerLoop },
    { RelayInferenceClient },
    { runGuarded },
    { runFingerprint },
  ] = await Promise.all([
    import("../distributed/redis.js"),
    import("../distributed/server-name.js"),
    import("../distributed/worker-loop.js"),
    import("../distributed/inference-relay.js"),
    import("../rollouts/run-guard.js"),
    import("../distributed/fingerprint.js"),
  ]);
  const closing = new AbortController();
  const workerClass = await resolveRolloutWorkerClass(config, recipe.dir, recipe.path, closing.signal);
  const workerOptions = await rolloutWorkerOptions(config, workerClass, recipe.path);
  const tokenizer = await loadTokenizer(tokenizerName(config), tokenizerOptions(config));
  const fingerprint = await runFingerprint(config, recipe.dir, tokenizerName(config));
  const log = (line: string): void => void io.stderr.write(`nexrl worker: ${line}\n`);
  const redis = await connectRedis(settings.url, log);
  const reader = await connectRedis(settings.url);
  // Worker instances see the worker's concurrency as rollout_worker.num_workers, and sample as the
  // driver's tasks say (not as this recipe does).
  const workerConfig = (sampling: TaskSampling): typeof config => ({
    ...config,
    rollout_worker: { ...config.rollout_worker, num_workers: concurrency, ...sampling },
  });
  const runners = new Map<string, ReturnType<typeof createRunner>>();
  /** The relay clients of the runners, whose connections are closed with them. */
  const relays: Array<InstanceType<typeof RelayInferenceClient>> = [];
  const closeRelays = (): Promise<unknown> => Promise.all(relays.splice(0).map((relay) => relay.close()));
  let session = "";
  const loop = new WorkerLoop({
    redis,
    reader,
    keys: new StreamKeys(settings.stream_prefix),
    ...(command.name !== undefined && { name: command.name }),
    concurrency,
    claimIdleMs: settings.claim_idle_ms,
    maxDeliveries: settings.max_deliveries,
    heartbeatMs: settings.heartbeat_ms,
    fingerprint,
    log,
    runnerFor(message, signal) {
      // A new driver session brings a new relay: the runners of the old one are dropped.
      if (message.session !== session) {
        runners.clear();
        void closeRelays();
        session = message.session;
      }
      const key = `${message.kind} ${message.inference?.url ?? ""} ${JSON.stringify(message.sampling)}`;
      let runner = runners.get(key);
      if (!runner) {
        const relay = message.inference && new RelayInferenceClient(message.inference, tokenizer);
        if (relay) relays.push(relay);
        runner = createRunner(workerConfig(message.sampling), {
          workerClass,
          workerOptions,
          namePrefix: message.kind === "train" ? "rollout_worker" : "validation_worker",
          tokenizer,
          inference: relay,
          policy: { mode: "fail_fast" },
          maxSequenceLength: undefined,
          currentVersion: () => message.version,
          signal,
        });
        runners.set(key, runner);
      }
      return runner;
    },
  });
  const stop = (): void => {
    log("stopping: no more tasks; handing back those in flight");
    loop.stop();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  void stopped?.then(stop);
  let crash: unknown;
  io.stdout.write(
    `nexrl worker ${loop.name}: ${concurrency} rollout(s) at once from ${serverName(settings.url)} (stream prefix ${settings.stream_prefix})\n`,
  );
  try {
    await runGuarded(
      {
        // The Redis connection keeps the process alive: a rollout that hangs is ended by its timeout.
        stalled: () => undefined,
        crashed(error) {
          crash = new UserCodeError(
            `an uncaught ${error instanceof Error ? `${error.name}: ${error.message}` : `throw of ${String(error)}`} outside any rollout`,
            { code: "uncaught", cause: error },
          );
          loop.stop();
        },
      },
      () => loop.run(),
    );
  } finally {
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
    closing.abort();
    await closeRelays();
    redis.destroy();
    reader.destroy();
  }
  if (crash) throw crash;
  io.stdout.write(`nexrl worker ${loop.name}: stopped after ${loop.finished} task(s), ${loop.failed} failed\n`);
  return EXIT_CODES.ok;
}
