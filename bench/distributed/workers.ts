/** `nexrl worker` processes of the built CLI, started and stopped by the distributed suite. */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

/** Running worker processes. */
export interface WorkerProcesses {
  /** Their process ids, for their CPU time in /proc. */
  pids: number[];
  /** What they printed, for a failure's message. */
  output(): string;
  /** SIGTERM to each (a worker hands back what it holds and exits), then waits for every exit. */
  stop(): Promise<void>;
}

/** Starts `count` × `nexrl worker -c RECIPE --redis URL --concurrency N rollout_worker.distributed.stream_prefix=P` in `cwd`. */
export function startWorkers(options: {
  recipe: string;
  redisUrl: string;
  streamPrefix: string;
  count: number;
  concurrency: number;
  cwd: string;
  /** Node options before the CLI's path (e.g. `--cpu-prof` for a profile). */
  nodeOptions?: string[];
  /** Environment variables beyond this process's. */
  env?: Record<string, string>;
}): WorkerProcesses {
  return watchedProcesses(options.count, () =>
    spawn(
      process.execPath,
      [
        ...(options.nodeOptions ?? []),
        CLI,
        "worker",
        "-c",
        options.recipe,
        "--redis",
        options.redisUrl,
        "--concurrency",
        String(options.concurrency),
        `rollout_worker.distributed.stream_prefix=${options.streamPrefix}`,
      ],
      {
        cwd: options.cwd,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, ...options.env, NEXRL_STORAGE_PATH: options.cwd },
      },
    ),
  );
}

/**
 * `count` processes made by `start`, their output collected (and any exit but a SIGTERM's
 * noted), stopped by SIGTERM to each.
 */
export function watchedProcesses(
  count: number,
  start: () => ChildProcess,
): WorkerProcesses & { children: readonly ChildProcess[] } {
  let output = "";
  const children = Array.from({ length: count }, () => {
    const child = start();
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code, signal) => {
      if (code !== 0 && signal !== "SIGTERM") output += `\n[a worker exited with ${code ?? signal}]\n`;
    });
    return child;
  });
  return {
    children,
    pids: children.map((c) => c.pid!),
    output: () => output,
    stop: async () => {
      await Promise.all(
        children.map(async (child) => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = once(child, "exit");
          child.kill("SIGTERM");
          await exited;
        }),
      );
    },
  };
}
