/**
 * Connecting to the Redis server of `rollout_worker.distributed`, and the names of the keys a run
 * uses on it. `@redis/client` is imported here only, when a run or a worker is distributed.
 * @module
 */
import type { RedisClientType } from "@redis/client";
import { redactUrlPasswords } from "../../recipe/redact.js";
import { serverName } from "./server-name.js";
import { DistributedError } from "../../errors.js";

/** A connected client (RESP2, no modules). */
export type Redis = RedisClientType;

/** Reconnections tried after a connection that worked is lost, before the client gives up. */
const RECONNECTS = 30;

/**
 * A client connected to `url`. The first connection fails at once with a {@link DistributedError}
 * that says what to check; a connection lost later is retried for about a minute.
 * @param onError told of errors after the connection was made (a lost connection, a retry).
 */
export async function connectRedis(url: string, onError: (error: DistributedError) => void): Promise<Redis> {
  const { createClient } = await import("@redis/client");
  let connected = false;
  const name = serverName(url);
  const client = createClient({
    url,
    socket: {
      connectTimeout: 10_000,
      reconnectStrategy: (retries: number, cause: Error) =>
        !connected || retries >= RECONNECTS ? cause : Math.min(100 * 2 ** retries, 2_000),
    },
  }) as unknown as Redis;
  client.on("error", (error: Error) => {
    if (connected) onError(describeFailure(name, error));
  });
  try {
    await client.connect();
  } catch (error) {
    throw describeFailure(name, error);
  }
  connected = true;
  return client;
}

/** A failure of the server `name`, with what to check. */
export function describeFailure(name: string, error: unknown): DistributedError {
  const text = redactUrlPasswords(error instanceof Error ? error.message : String(error));
  const hint = /WRONGPASS|NOAUTH|invalid username-password/i.test(text)
    ? "check the user and password of rollout_worker.distributed.url (or --redis)"
    : "check that redis-server runs there and that this machine can reach it (rollout_worker.distributed.url, or --redis)";
  return new DistributedError(`the Redis server ${name} failed: ${text}; ${hint}`, { cause: error });
}

/** The keys of the runs sharing `stream_prefix` on one server. */
export class StreamKeys {
  /** @param prefix `rollout_worker.distributed.stream_prefix`. */
  constructor(readonly prefix: string) {}

  /** The stream of rollout tasks, which every worker reads through the consumer group. */
  get tasks(): string {
    return `${this.prefix}:tasks`;
  }

  /** The consumer group of the workers. */
  get group(): string {
    return "workers";
  }

  /** The id of the driver session whose tasks are current; tasks of any other are dropped. */
  get session(): string {
    return `${this.prefix}:session`;
  }

  /** The results stream of driver session `session`. */
  results(session: string): string {
    return `${this.prefix}:results:${session}`;
  }

  /** The heartbeat of worker `name` (expires when the worker stops beating). */
  worker(name: string): string {
    return `${this.prefix}:worker:${name}`;
  }

  /** The pattern of every worker's heartbeat key. */
  get workers(): string {
    return `${this.prefix}:worker:*`;
  }

  /** Creates the tasks stream and its group unless they exist. */
  async ensureGroup(redis: Redis): Promise<void> {
    try {
      await redis.xGroupCreate(this.tasks, this.group, "0", { MKSTREAM: true });
    } catch (error) {
      if (!(error instanceof Error && error.message.startsWith("BUSYGROUP"))) throw error;
    }
  }
}
