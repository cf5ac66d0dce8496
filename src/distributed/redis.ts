/**
 * Connecting to the Redis server of `rollout_worker.distributed`, watching that it answers, and
 * the names of the keys a run uses on it. This module (and `@redis/client` with it) is loaded
 * only when a run or a worker is distributed.
 * @module
 */
import { createClient, ErrorReply, MultiErrorReply, type RedisClientType } from "@redis/client";
import { redactUrlPasswords } from "../recipe/redact.js";
import { serverName } from "./server-name.js";
import { DistributedError } from "../errors.js";

/** A connected client (RESP2, no modules). */
export type Redis = RedisClientType;

/** Longest wait between reconnections, once a connection that worked is lost. */
const RECONNECT_MAX_MS = 2_000;
/** Milliseconds between the probes of a watched client. */
const PROBE_MS = 1_000;
/** Milliseconds a probe may go unanswered before the user is told. */
const NOTICE_AFTER_MS = 3_000;
/** Milliseconds between the notices while the server does not answer. */
const NOTICE_EVERY_MS = 10_000;

/**
 * A client connected to `url`. The first connection fails at once with a {@link DistributedError}
 * that says what to check; a connection lost later is retried with backoff for as long as the
 * client is open (a Redis restart does not end a run), commands waiting meanwhile.
 * @param say when given, the client is watched: told when the server stops answering (lost,
 *   restarting or stalled), every few seconds while it does not, and when it answers again.
 */
export async function connectRedis(url: string, say?: (line: string) => void): Promise<Redis> {
  let connected = false;
  const name = serverName(url);
  const client = createClient({
    url,
    socket: {
      connectTimeout: 10_000,
      reconnectStrategy: (retries: number, cause: Error) =>
        connected ? Math.min(100 * 2 ** retries, RECONNECT_MAX_MS) : cause,
    },
  }) as unknown as Redis;
  // Every failed reconnection is an error event: what the user needs to know the watch says.
  client.on("error", () => undefined);
  try {
    await client.connect();
  } catch (error) {
    throw describeFailure(name, error);
  }
  connected = true;
  if (say) watch(client, name, say);
  return client;
}

/**
 * Checks that the server of `url` answers (connects, then disconnects): what a run does before
 * it writes its folder, so that a run refused for an unreachable server leaves none.
 * @throws {@link DistributedError} naming the server and what to check.
 */
export async function checkRedis(url: string): Promise<void> {
  const client = await connectRedis(url);
  client.destroy();
}

/**
 * Probes `client` every {@link PROBE_MS} until it is closed, and tells `say` when a probe goes
 * unanswered for {@link NOTICE_AFTER_MS} (then every {@link NOTICE_EVERY_MS}) and when the server
 * answers again.
 */
function watch(client: Redis, name: string, say: (line: string) => void): void {
  // Probes wait as long as it takes: a probe that answers late ends the outage it measured.
  const prober = client.withCommandOptions({ timeout: 0 });
  let probing = false;
  /** When the first probe still unanswered was sent. */
  let silentSince: number | undefined;
  let noticed: number | undefined;
  const seconds = (since: number): number => Math.round((Date.now() - since) / 1000);
  const tick = (): void => {
    if (!client.isOpen) return clearInterval(timer);
    const now = Date.now();
    silentSince ??= now;
    const since = silentSince;
    if (now - since >= NOTICE_AFTER_MS && (noticed === undefined || now - noticed >= NOTICE_EVERY_MS)) {
      noticed = now;
      say(
        client.isReady
          ? `Redis at ${name} not answering (${seconds(since)} s without a reply: stalled or overloaded?)`
          : `Redis at ${name} not answering, reconnecting (${seconds(since)} s)`,
      );
    }
    if (probing) return;
    probing = true;
    prober.ping().then(
      () => {
        probing = false;
        if (noticed !== undefined && client.isOpen) say(`Redis at ${name} answering again after ${seconds(since)} s`);
        silentSince = noticed = undefined;
      },
      // The connection was lost under the probe: the next tick sends another, the outage goes on.
      () => (probing = false),
    );
  };
  const timer = setInterval(tick, PROBE_MS).unref();
  client.on("end", () => clearInterval(timer));
}

/** Replies of a server that is restarting or recovering: a retry once it is back succeeds. */
const PASSING_REPLIES = /^(NOGROUP|LOADING|BUSY|MASTERDOWN|TRYAGAIN)\b/;

/**
 * Whether `error` is the server being away (the connection lost, a command timed out, the
 * server loading its data or restarted without the group) rather than a command it refuses:
 * what is worth retrying once the client has reconnected.
 */
export function serverAway(error: unknown): boolean {
  if (error instanceof MultiErrorReply) return [...error.errors()].every((reply) => serverAway(reply));
  if (error instanceof ErrorReply) return PASSING_REPLIES.test(error.message);
  return error instanceof Error;
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

  /** The recipe fingerprint driver session `session` published (JSON), which workers check their recipe against. */
  fingerprint(session: string): string {
    return `${this.prefix}:fingerprint:${session}`;
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

  /** The dead-letter stream: entries of the tasks and results streams that are not nexrl messages. */
  get deadLetters(): string {
    return `${this.prefix}:dead`;
  }

  /** The count of the messages ever moved to {@link StreamKeys.deadLetters} (which keeps the last ones only). */
  get deadLetterCount(): string {
    return `${this.prefix}:dead:count`;
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

/** Dead letters the dead-letter stream keeps (the oldest go first); the count counts them all. */
const DEAD_LETTERS_KEPT = 1_000;

/**
 * A transaction (to add to and run) that moves entry `entry` of stream `source` (its `body`
 * field: what was read) to the dead-letter stream with `problem`, and counts it.
 */
export function moveToDeadLetters(
  redis: Redis,
  keys: StreamKeys,
  source: string,
  entry: string,
  body: unknown,
  problem: string,
) {
  const letter = { source, entry, problem, body: typeof body === "string" ? body : "" };
  return redis
    .multi()
    .xAdd(keys.deadLetters, "*", letter, {
      TRIM: { strategy: "MAXLEN", strategyModifier: "~", threshold: DEAD_LETTERS_KEPT },
    })
    .incr(keys.deadLetterCount);
}
