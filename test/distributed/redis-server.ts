/**
 * A throwaway `redis-server` for the distributed rollout tests: on 127.0.0.1, a free port, a temp
 * folder, nothing persisted unless asked; it can be killed, stalled and restarted. Tests skip with a warning when the binary is missing.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Whether `redis-server` runs here; warns once how to get it when not. */
export const redisAvailable: boolean = (() => {
  const found = spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
  if (!found)
    process.emitWarning(
      "redis-server is not installed: the distributed rollout tests are skipped. Run scripts/ensure-redis.sh (as root, with apt) or put redis-server on the PATH.",
    );
  return found;
})();

/** A running test server. */
export interface TestRedis {
  /** `redis://127.0.0.1:PORT`. */
  url: string;
  /** The port. */
  port: number;
  /** Sends `signal` to the server process (SIGKILL, SIGSTOP, SIGCONT); resolves once a SIGKILLed one is gone. */
  signal(signal: NodeJS.Signals): Promise<void>;
  /** Starts the server again, on the same port and folder, after it was killed. */
  restart(): Promise<void>;
  /** Stops the server and removes its folder. */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once something accepts connections on `port`. */
async function accepting(port: number, child: ChildProcess): Promise<void> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Starts a `redis-server` (optionally with `requirepass`; with `appendonly` it persists every
 * write to its folder, fsynced every second, and a restart reads it back).
 */
export async function startRedis(options: { password?: string; appendonly?: boolean } = {}): Promise<TestRedis> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-redis-"));
  const port = await freePort();
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir];
  args.push("--appendonly", options.appendonly ? "yes" : "no");
  if (options.password) args.push("--requirepass", options.password);
  const launch = async (): Promise<ChildProcess> => {
    const started = spawn("redis-server", args, { stdio: "ignore" });
    await accepting(port, started);
    return started;
  };
  let child = await launch();
  const exited = (process: ChildProcess): Promise<unknown> =>
    process.exitCode !== null || process.signalCode !== null
      ? Promise.resolve()
      : new Promise((resolve) => process.once("exit", resolve));
  const auth = options.password ? `:${encodeURIComponent(options.password)}@` : "";
  return {
    url: `redis://${auth}127.0.0.1:${port}`,
    port,
    async signal(signal) {
      const gone = exited(child);
      child.kill(signal);
      if (signal === "SIGKILL") await gone;
    },
    async restart() {
      child = await launch();
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = exited(child);
        child.kill("SIGCONT");
        child.kill("SIGTERM");
        await gone;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
