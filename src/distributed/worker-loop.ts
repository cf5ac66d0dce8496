/**
 * {@link WorkerLoop}: what `nexrl worker` runs. It reads rollout tasks through the workers'
 * consumer group, looking once a heartbeat first for tasks left unacknowledged too long by other
 * workers (`XAUTOCLAIM`), runs up to `concurrency` at once, and writes each result to the stream
 * the task names in one transaction with the task's acknowledgement, so a task is acknowledged
 * only with its result written. Every heartbeat resets the idle time of the tasks it runs, so a
 * task is claimed by another worker only once its worker stopped beating for the claim time,
 * however long the rollout. On {@link WorkerLoop.stop} it takes no more tasks and hands back
 * those in flight (queued again, then acknowledged), so no task waits for the claim time after
 * a clean stop. A server that is away (a lost connection, a restart, a stall) is waited for:
 * the loop reads again once the client has reconnected (creating the group again if the server
 * lost it), and results are written once it is back. Before it runs a task of a driver session, it
 * checks its own recipe's fingerprint against the one the session published: a worker of
 * another recipe hands back what it read and fails, having run nothing of that session.
 * @module
 */
import { hostname } from "node:os";
import type { RolloutRunner } from "../rollouts/runner.js";
import { retryCouldHelp, userFrames } from "../rollouts/error-origin.js";
import { Heartbeat } from "./heartbeats.js";
import { publishedMismatch } from "./fingerprint.js";
import {
  encode,
  readTask,
  type RemoteFailure,
  type ResultMessage,
  type RunFingerprint,
  type TaskMessage,
} from "./messages.js";
import { moveToDeadLetters, serverAway, type Redis, type StreamKeys } from "./redis.js";
import { sleep } from "../http/backoff.js";
import { NexrlError, UserCodeError, type ConfigError } from "../errors.js";

/** Options of {@link WorkerLoop}. */
export interface WorkerLoopOptions {
  /** Commands (results, acks, heartbeats). */
  redis: Redis;
  /** Blocking reads of the tasks stream. */
  reader: Redis;
  /** The keys of the run's `stream_prefix`. */
  keys: StreamKeys;
  /** The consumer name (default `host-pid`). */
  name?: string;
  /** Tasks run at once. */
  concurrency: number;
  /** `rollout_worker.distributed.claim_idle_ms`. */
  claimIdleMs: number;
  /** `rollout_worker.distributed.max_deliveries`. */
  maxDeliveries: number;
  /** `rollout_worker.distributed.heartbeat_ms`. */
  heartbeatMs: number;
  /** This worker's recipe fingerprint: the tasks of a driver session that published another are refused. */
  fingerprint: RunFingerprint;
  /** The runner of a task (made once per kind and relay); `signal` aborts when the worker stops. */
  runnerFor(message: TaskMessage, signal: AbortSignal): RolloutRunner;
  /** Told of what the worker does (a task handed back, a message that could not be read). */
  log(line: string): void;
}

/** A task message as read from the stream. */
interface Delivery {
  /** The stream entry's id. */
  entry: string;
  /** Its `body` field (none in an entry that is not a nexrl message). */
  body: string | undefined;
  /** Times it was delivered, this one included. */
  deliveries: number;
}

/** Tasks read together, and the driver session current when they were read (null: none). */
interface Batch {
  deliveries: Delivery[];
  session: string | null;
}

/** Milliseconds a read of the tasks stream blocks. */
const READ_BLOCK_MS = 500;
/** Milliseconds before a command that failed because the server is away is tried again. */
const RETRY_MS = 250;

/** Consumes rollout tasks until stopped. */
export class WorkerLoop {
  /** The consumer name. */
  readonly name: string;
  private stopping = false;
  private readonly inFlight = new Map<string, { delivery: Delivery; done: Promise<void> }>();
  private tasks = 0;
  private failures = 0;
  private deadLettered = 0;
  private slotFreed: () => void = () => undefined;
  /** When the loop next looks for tasks to claim (`Date.now()` milliseconds). */
  private nextClaim = 0;
  private readonly heartbeat: Heartbeat;
  private readonly stopController = new AbortController();
  /** The last driver session whose fingerprint matched (or which published none). */
  private checkedSession: string | undefined;
  /** Why the loop stopped, when a session's fingerprint differs; and the tasks it read of it. */
  private refusal: { error: ConfigError; read: Delivery[] } | undefined;

  /** @param options streams, concurrency and the runners. */
  constructor(private readonly options: WorkerLoopOptions) {
    this.name = options.name ?? `${hostname()}-${process.pid}`;
    this.heartbeat = new Heartbeat(
      options.redis,
      options.keys,
      options.heartbeatMs,
      () => ({
        name: this.name,
        tasks: this.tasks,
        failures: this.failures,
        running: this.inFlight.size,
        entries: [...this.inFlight.keys()],
      }),
      () => this.keepClaimed(),
    );
  }

  /** Attempts finished (results written) so far. */
  get finished(): number {
    return this.tasks;
  }

  /** Of those, attempts that failed. */
  get failed(): number {
    return this.failures;
  }

  /**
   * Runs until {@link WorkerLoop.stop}: then the tasks in flight are handed back and it
   * resolves. Rejects when the server fails, and with a {@link "nexrl/errors".ConfigError | ConfigError} naming what differs
   * when a driver session's recipe fingerprint is not this worker's (at once when the driver runs
   * already).
   */
  async run(): Promise<void> {
    const { keys, redis } = this.options;
    await keys.ensureGroup(redis);
    const current = await redis.get(keys.session);
    const refused = current === null ? undefined : await this.checkRecipe(current);
    if (refused) throw refused;
    await this.heartbeat.start();
    try {
      while (!this.stopping) {
        try {
          await this.takeTasks();
        } catch (error) {
          if (this.stopping || !serverAway(error)) throw error;
          // The client reconnects meanwhile; a server that restarted empty lost the group.
          await sleep(RETRY_MS);
          await keys.ensureGroup(redis).catch(() => undefined);
        }
      }
    } finally {
      await this.handBack();
      await this.heartbeat.stop();
    }
    if (this.refusal) throw this.refusal.error;
  }

  /** Fills the free slots with tasks claimed or read (waits for a slot when none is free). */
  private async takeTasks(): Promise<void> {
    const { keys, redis } = this.options;
    const free = this.options.concurrency - this.inFlight.size;
    if (free === 0) {
      await new Promise<void>((resolve) => (this.slotFreed = resolve));
      // The slots freed in the same turn of the event loop are filled by one read.
      await new Promise((resolve) => setImmediate(resolve));
      return;
    }
    // Claiming scans the group's pending tasks: once a heartbeat is often enough for a claim time of several.
    let batch: Batch | undefined;
    if (Date.now() >= this.nextClaim) {
      this.nextClaim = Date.now() + this.options.heartbeatMs;
      const claimed = await this.claim(free);
      // There may be more to claim.
      if (claimed.length === free) this.nextClaim = 0;
      if (claimed.length > 0) batch = { deliveries: claimed, session: await redis.get(keys.session) };
    }
    if (!batch && !this.stopping) batch = await this.read(free);
    if (!batch) return;
    if (batch.session !== null && batch.session !== this.checkedSession) {
      const error = await this.checkRecipe(batch.session);
      if (error) {
        this.refusal = { error, read: batch.deliveries };
        this.stop();
        return;
      }
    }
    for (const delivery of batch.deliveries) this.start(delivery, batch.session);
  }

  /**
   * The error of a driver `session` whose published fingerprint differs from this worker's;
   * undefined when it matches or there is none (said once per session: a driver of an older
   * nexrl publishes none, and its tasks run unchecked).
   */
  private async checkRecipe(session: string): Promise<ConfigError | undefined> {
    const { redis, keys, fingerprint } = this.options;
    const key = keys.fingerprint(session);
    const published = await redis.get(key);
    if (published === null) {
      // The driver closed meanwhile (it deletes its session before its fingerprint): nobody waits for its tasks.
      if ((await redis.get(keys.session)) !== session) return undefined;
      this.options.log(
        `driver session ${session} published no recipe fingerprint (a driver of an older nexrl?): its tasks run without checking that this worker's recipe is the driver's`,
      );
    } else {
      const error = publishedMismatch(fingerprint, published, key, keys.prefix);
      if (error) return error;
    }
    this.checkedSession = session;
    return undefined;
  }

  /**
   * Runs `write` until the server takes it, waiting out a server that is away; gives up when
   * the worker stops meanwhile. A transaction whose reply was lost may run twice: each of ours
   * may (a result twice is a duplicate the driver ignores).
   */
  private async untilWritten(write: () => Promise<unknown>): Promise<void> {
    for (;;) {
      try {
        await write();
        return;
      } catch (error) {
        if (this.stopping || !serverAway(error)) throw error;
        await sleep(RETRY_MS);
      }
    }
  }

  /** Takes no more tasks; {@link WorkerLoop.run} hands back those in flight and resolves. */
  stop(): void {
    this.stopping = true;
    this.stopController.abort(new NexrlError("the worker is stopping"));
    this.slotFreed();
  }

  /** Resets the idle time of the tasks this worker runs (those still its own), so nobody claims them. */
  private async keepClaimed(): Promise<void> {
    if (this.inFlight.size === 0) return;
    const { redis, keys } = this.options;
    const pending = await redis.xPendingRange(keys.tasks, keys.group, "-", "+", this.inFlight.size + 16, {
      consumer: this.name,
    });
    const ours = pending.map((entry) => String(entry.id)).filter((id) => this.inFlight.has(id));
    if (ours.length > 0) await redis.xClaimJustId(keys.tasks, keys.group, this.name, 0, ours);
  }

  /** Up to `count` tasks other workers left unacknowledged longer than the claim time. */
  private async claim(count: number): Promise<Delivery[]> {
    const { redis, keys, claimIdleMs } = this.options;
    const claimed = await redis.xAutoClaim(keys.tasks, keys.group, this.name, claimIdleMs, "0-0", { COUNT: count });
    const deliveries: Delivery[] = [];
    for (const message of claimed.messages) {
      // Its own task, idle because the heartbeat was late: it runs here already.
      if (!message || this.inFlight.has(message.id)) continue;
      const [pending] = await redis.xPendingRange(keys.tasks, keys.group, message.id, message.id, 1);
      deliveries.push({
        entry: message.id,
        body: message.message.body as string | undefined,
        deliveries: pending?.deliveriesCounter ?? 2,
      });
    }
    return deliveries;
  }

  /**
   * Up to `count` new tasks, waiting a little for them, and the session current once they were
   * read: the GET is sent with the read on its connection, and Redis runs it only once the
   * blocked read has returned, so it costs no round trip of its own.
   */
  private async read(count: number): Promise<Batch> {
    const { reader, keys } = this.options;
    const [replies, session] = (await Promise.all([
      reader.xReadGroup(keys.group, this.name, { key: keys.tasks, id: ">" }, { COUNT: count, BLOCK: READ_BLOCK_MS }),
      reader.get(keys.session),
    ])) as [Array<{ messages: Array<{ id: string; message: { body: string } }> }> | null, string | null];
    const deliveries = (replies ?? []).flatMap((reply) =>
      reply.messages.map((message) => ({
        entry: message.id,
        body: message.message.body as string | undefined,
        deliveries: 1,
      })),
    );
    return { deliveries, session };
  }

  /** Runs `delivery` in the background; `session` is the driver session current when it was read. */
  private start(delivery: Delivery, session: string | null): void {
    const done = this.handle(delivery, session)
      .catch((error: unknown) =>
        this.options.log(
          `task ${delivery.entry} was not answered (it will be claimed again): ${error instanceof Error ? error.message : String(error)}`,
        ),
      )
      .finally(() => {
        this.inFlight.delete(delivery.entry);
        this.slotFreed();
      });
    this.inFlight.set(delivery.entry, { delivery, done });
  }

  /** Runs one task and answers it; the task is acknowledged only once its result is written. */
  private async handle(delivery: Delivery, session: string | null): Promise<void> {
    const { redis, keys } = this.options;
    const read = readTask(delivery.body);
    if (!read.ok) return this.deadLetter(delivery, read.problem);
    const message = read.value;
    // The tasks of a driver that stopped or was restarted are not run: nobody waits for their results.
    if (session !== message.session) {
      await this.acknowledge(delivery.entry);
      return;
    }
    const base = { id: message.id, worker: this.name, deliveries: delivery.deliveries };
    let result: ResultMessage;
    if (delivery.deliveries > this.options.maxDeliveries) {
      result = {
        ...base,
        ok: false,
        error: {
          name: "DistributedError",
          message: `the task was delivered ${delivery.deliveries} times without a result (its workers died or stopped while running it), more than rollout_worker.distributed.max_deliveries (${this.options.maxDeliveries})`,
          retryable: true,
        },
      };
    } else {
      try {
        const { trajectories, unknownTokenIds } = await this.options
          .runnerFor(message, this.stopController.signal)
          .once(message.task, message.attempt, message.version);
        result = { ...base, ok: true, trajectories, unknownTokenIds };
      } catch (error) {
        // Stopping: the task is handed back, not answered.
        if (this.stopping) return;
        result = { ...base, ok: false, error: remoteFailure(error) };
      }
    }
    if (this.stopping && !this.inFlight.has(delivery.entry)) return;
    // The result and the acknowledgement go together (MULTI): a task is acknowledged only with its result written.
    const body = encode(result);
    await this.untilWritten(() =>
      redis
        .multi()
        .xAdd(message.results, "*", { body })
        .xAck(keys.tasks, keys.group, delivery.entry)
        .xDel(keys.tasks, delivery.entry)
        .exec(),
    );
    this.tasks++;
    if (!result.ok) this.failures++;
  }

  /** Moves a task that is not a nexrl task message to the dead-letter stream (saying so the first time). */
  private async deadLetter(delivery: Delivery, problem: string): Promise<void> {
    const { redis, keys } = this.options;
    await this.untilWritten(() =>
      moveToDeadLetters(redis, keys, keys.tasks, delivery.entry, delivery.body, problem)
        .xAck(keys.tasks, keys.group, delivery.entry)
        .xDel(keys.tasks, delivery.entry)
        .exec(),
    );
    if (this.deadLettered++ === 0)
      this.options.log(
        `task ${delivery.entry} is not a nexrl task message (${problem}): moved to the dead-letter stream ${keys.deadLetters}; later ones are moved without a word, counted in the driver's workers/dead_letters`,
      );
  }

  /** Acknowledges task `entry` and deletes it: the stream holds only tasks not yet answered. */
  private async acknowledge(entry: string): Promise<void> {
    const { redis, keys } = this.options;
    await this.untilWritten(() => redis.multi().xAck(keys.tasks, keys.group, entry).xDel(keys.tasks, entry).exec());
  }

  /**
   * Queues the tasks in flight, and those read of a session refused, again (each as a new entry,
   * the old one acknowledged), for other workers.
   */
  private async handBack(): Promise<void> {
    const { redis, keys } = this.options;
    const left = [...[...this.inFlight.values()].map(({ delivery }) => delivery), ...(this.refusal?.read ?? [])];
    this.inFlight.clear();
    if (left.length === 0) return;
    const queue = redis.multi();
    for (const delivery of left)
      queue
        .xAdd(keys.tasks, "*", { body: delivery.body ?? "" })
        .xAck(keys.tasks, keys.group, delivery.entry)
        .xDel(keys.tasks, delivery.entry);
    try {
      await queue.exec();
    } catch (error) {
      // Left pending: other workers claim them after claim_idle_ms.
      this.options.log(
        `could not hand back ${left.length} task(s) in flight (${error instanceof Error ? error.message : String(error)}): other workers take them over once they have been idle for claim_idle_ms`,
      );
      return;
    }
    this.options.log(`handed back ${left.length} task(s) in flight`);
  }
}

/** What a worker reports of a failed attempt. */
function remoteFailure(error: unknown): RemoteFailure {
  const frames = userFrames(error instanceof UserCodeError && error.code === "uncaught" ? error.cause : error);
  const at = frames.length === 0 ? "" : `\n${frames.map((frame) => `    at ${frame}`).join("\n")}`;
  return {
    name: error instanceof Error ? error.name : "Error",
    message: `${error instanceof Error ? error.message : String(error)}${at}`,
    ...(error instanceof UserCodeError && { problem: error.code }),
    retryable: retryCouldHelp(error),
  };
}
