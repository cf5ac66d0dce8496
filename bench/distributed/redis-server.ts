/**
 * A throw-away `redis-server` for the distributed suite: Debian's package (`scripts/ensure-redis.sh`
 * installs it), on 127.0.0.1 at a free port, with no persistence, in a temporary folder.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

/** A running server and its address. */
export interface RedisServer {
  /** `redis://127.0.0.1:PORT`. */
  url: string;
  /** The server's process id, for its CPU time in /proc. */
  pid: number;
  close(): Promise<void>;
}

/** A port nothing listens on now (the kernel's pick for an ephemeral listener, released at once). */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  server.close();
  await once(server, "close");
  return port;
}

/** Starts `redis-server`; rejects, saying how to install it, when it is not on the PATH. */
export async function startRedis(): Promise<RedisServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "nexrl-bench-redis-"));
  const port = await freePort();
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let output = "";
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) resolve();
    });
    child.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "ENOENT"
          ? new Error("redis-server is not on the PATH: run scripts/ensure-redis.sh (Debian's redis-server package)")
          : error,
      ),
    );
    child.once("exit", (code) =>
      reject(new Error(`redis-server exited with code ${code} before it was ready:\n${output}`)),
    );
  });
  await ready;
  child.stdout!.resume();
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: child.pid!,
    close: async () => {
      if (child.exitCode === null) {
        const exited = once(child, "exit");
        child.kill("SIGTERM");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
