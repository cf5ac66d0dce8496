/**
 * {@link RedisRollouts}: the driver's side of distributed rollouts. Each attempt the runners hand
 * it goes to the tasks stream; one loop reads the session's results stream and settles the
 * attempt it answers. A result whose attempt is already settled (a slow worker and the worker
 * that claimed its task both finished) is counted once and otherwise ignored. The driver keeps
 * every task it waits for: after a lost connection (a Redis restart) it puts back what the
 * server lost (the consumer group, the session key and the session's recipe fingerprint) and
 * sends again the tasks that are gone from the stream without a result, which a restart without
 * persistence loses.
 * @module
 */
import { randomBytes } from "node:crypto";
import type { DistributedOptions } from "../recipe/schema/rollout-worker.js";
import type { RemoteAttemptResult, RemoteAttempts } from "../rollouts/runner.js";
import type { RolloutTask } from "../contracts/task.js";
import { readHeartbeats, type WorkerHealth } from "./heartbeats.js";
import {
  decode,
  encode,
  failureError,
  readResult,
  type InferenceTarget,
  type ResultMessage,
  type RunFingerprint,
  type TaskKind,
  type TaskSampling,
} from "./messages.js";
import { connectRedis, describeFailure, moveToDeadLetters, serverAway, StreamKeys, type Redis } from "./redis.js";
import { sleep } from "../http/backoff.js";
import { serverName } from "./server-name.js";
import { DistributedError } from "../errors.js";

/** Counters of the results since the last {@link RedisRollouts.takeCounts}. */
export interface ResultCounts {
  /** Attempts the workers finished: results that settled an attempt. */
  tasks: number;
  /** Of those, attempts that failed. */
  failures: number;
  /** Results of attempts that were settled already, ignored. */
  duplicates: number;
  /** Attempts settled by a worker that claimed the task from another (dead or stopped) one. */
  reclaimed: number;
}

/** An attempt waiting for its result. */
interface Waiting {
  resolve(result: RemoteAttemptResult): void;
  reject(error: unknown): void;
  /** Its task message. */
  body: string;
  /** Its entry in the tasks stream, once the server took it. */
  entry: string | undefined;
  /** Whether an XADD of it is waiting for its reply. */
  sending: boolean;
}

/** Milliseconds the results loop blocks on the stream per read. */
const READ_BLOCK_MS = 1_000;
/** Milliseconds before a read that failed because the server is away is tried again. */
const RETRY_MS = 250;
/**
 * Milliseconds after a reconnection during which the driver looks for lost tasks, every
 * {@link SWEEP_MS}: tasks a restarted server took before the session key was back can be dropped
 * by workers, and are sent again by a later look.
 */
const RECOVERY_WINDOW_MS = 15_000;
const SWEEP_MS = 2_000;
/**
 * Milliseconds a task must stay missing (no stream entry, no worker's heartbeat running it, no
 * result) before it is sent again: a restarted server holds no heartbeats until the workers beat
 * again (every `heartbeat_ms`, 2 s by default), and a task a worker still runs must not run twice.
 */
const CONFIRM_MS = 5_000;
/** Milliseconds between the looks for workers while tasks wait and none is connected. */
const WORKERS_LOOK_MS = 5_000;

/** Publishes rollout attempts to Redis and collects their results. */
export class RedisRollouts {
  private readonly waiting = new Map<string, Waiting>();
  private sent = 0;
  private counts: ResultCounts = noCounts();
  private closed = false;
  private readonly reading: Promise<void>;
  private failure: DistributedError | undefined;
  /** Until when (`Date.now()`) the results loop looks for lost tasks; 0: no reconnection to recover from. */
  private recoverUntil = 0;
  private nextSweep = 0;
  /** When each task waiting was first found missing since the last reconnection. */
  private readonly missingSince = new Map<string, number>();
  private deadLettered = 0;
  /** The dead-letter count at the last {@link RedisRollouts.takeDeadLetters} (at the start: when the driver opened). */
  private deadLettersSeen: number;
  /**
   * `redis` without the client's default command timeout for the tasks sent, which costs a timer
   * and an abort signal per command; the results loop's reads keep it, and fail every attempt
   * waiting when the server stops answering.
   */
  private readonly sender: Redis;

  private constructor(
    private readonly redis: Redis,
    private readonly reader: Redis,
    private readonly keys: StreamKeys,
    /** This driver session: a restarted driver has another, so stale results and tasks are ignored. */
    readonly session: string,
    private readonly name: string,
    private readonly say: (line: string) => void,
    deadLetters: number,
    /** The session's fingerprint as published (JSON), put back after a restart. */
    private readonly fingerprint: string,
  ) {
    this.deadLettersSeen = deadLetters;
    this.sender = redis.withCommandOptions({ timeout: 0 }) as unknown as Redis;
    for (const client of [redis, reader]) client.on("ready", () => this.reconnected());
    this.reading = this.readResults();
    this.looking = setInterval(() => void this.lookForWorkers(), WORKERS_LOOK_MS).unref();
  }

  private readonly looking: NodeJS.Timeout;
  private lookingNow = false;

  /** Says that tasks wait and no worker is connected (a driver alone would otherwise print nothing). */
  private async lookForWorkers(): Promise<void> {
    if (this.waiting.size === 0 || this.lookingNow) return;
    this.lookingNow = true;
    try {
      const workers = (await readHeartbeats(this.redis, this.keys)).length;
      if (workers === 0 && this.waiting.size > 0 && !this.closed)
        this.say(
          `waiting for workers (0 connected, ${this.waiting.size} tasks queued): start nexrl worker processes with this recipe (or --redis) on stream prefix ${this.keys.prefix}`,
        );
    } catch {
      // The server is away: its own notices say so.
    } finally {
      this.lookingNow = false;
    }
  }

  /**
   * Resolves once `signal` has aborted while tasks wait and no worker is connected (looked at
   * then and every second after), so that nothing will run them: a run stopped in that state
   * need not wait for its step. Never resolves otherwise.
   */
  async stranded(signal: AbortSignal): Promise<void> {
    await new Promise<void>((resolve) =>
      signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    while (!this.closed) {
      const workers = await readHeartbeats(this.redis, this.keys).catch(() => undefined);
      if (workers?.length === 0 && this.waiting.size > 0) return;
      await sleep(1_000);
    }
    await new Promise<never>(() => undefined);
  }

  /**
   * Connects, creates the stream and group if need be, and makes this driver the current session
   * of `stream_prefix` (tasks of an earlier driver are dropped by the workers), publishing
   * `fingerprint` with it for the workers to check their recipes against.
   * @param onError told of connection trouble after the start.
   */
  static async open(
    settings: DistributedOptions,
    onError: (error: DistributedError) => void,
    fingerprint: RunFingerprint,
  ): Promise<RedisRollouts> {
    const say = (line: string): void => onError(new DistributedError(line));
    const redis = await connectRedis(settings.url, say);
    const reader = await connectRedis(settings.url);
    const keys = new StreamKeys(settings.stream_prefix);
    const session = `${Date.now().toString(36)}-${randomBytes(6).toString("hex")}`;
    const published = encode(fingerprint);
    let deadLetters: number;
    try {
      await keys.ensureGroup(redis);
      // In one transaction: a worker that sees the session finds its fingerprint.
      const [, previous] = await redis
        .multi()
        .set(keys.fingerprint(session), published)
        .set(keys.session, session, { GET: true })
        .exec();
      // A driver that died (a restart after a crash) left its results stream: nobody reads it now.
      if (typeof previous === "string") await redis.del([keys.results(previous), keys.fingerprint(previous)]);
      deadLetters = Number((await redis.get(keys.deadLetterCount)) ?? 0);
    } catch (error) {
      redis.destroy();
      reader.destroy();
      throw describeFailure(serverName(settings.url), error);
    }
    return new RedisRollouts(redis, reader, keys, session, serverName(settings.url), say, deadLetters, published);
  }

  /**
   * The {@link RemoteAttempts} of one runner: its kind, the relay its rollouts sample from (none
   * when they may not) and how they sample.
   */
  attempts(kind: TaskKind, inference: InferenceTarget | undefined, sampling: TaskSampling): RemoteAttempts {
    const shared = encode({
      session: this.session,
      results: this.keys.results(this.session),
      kind,
      ...(inference && { inference }),
      sampling,
    }).slice(1, -1);
    return { run: (task, attempt, version, signal) => this.run(shared, task, attempt, version, signal) };
  }

  /** The counters since the last call, reset. */
  takeCounts(): ResultCounts {
    const counts = this.counts;
    this.counts = noCounts();
    return counts;
  }

  /** The workers beating now (waiting for a server that is away to come back). */
  workers(): Promise<WorkerHealth[]> {
    return this.whenAnswered(() => readHeartbeats(this.redis, this.keys));
  }

  /** What `command` gives, tried again while the server is away. */
  private async whenAnswered<T>(command: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await command();
      } catch (error) {
        if (this.closed || !serverAway(error)) throw error;
        await sleep(RETRY_MS);
      }
    }
  }

  /** Stops reading results, drops this session's streams and disconnects; attempts still waiting fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.looking);
    await this.reading;
    try {
      // Workers drop the tasks of a session that is no longer current. The session goes before
      // its fingerprint: a worker that finds no fingerprint looks whether the session is gone.
      if ((await this.redis.get(this.keys.session)) === this.session) await this.redis.del(this.keys.session);
      await this.redis.del([this.keys.results(this.session), this.keys.fingerprint(this.session)]);
    } catch {
      // The server is gone: there is nothing left to tidy.
    }
    this.redis.destroy();
    this.reader.destroy();
  }

  /** Sends attempt `attempt` of `task` (`shared`: the members of {@link RedisRollouts.attempts}) and waits for its result. */
  private async run(
    shared: string,
    task: RolloutTask,
    attempt: number,
    version: number,
    signal: AbortSignal,
  ): Promise<RemoteAttemptResult> {
    if (this.failure) throw this.failure;
    const id = `${this.session}:${++this.sent}`;
    // A TaskMessage; what is the same for every task of the runner is encoded once.
    const body = `{"id":${JSON.stringify(id)},"attempt":${attempt},"version":${version},${shared},"task":${encode(task)}}`;
    const result = new Promise<RemoteAttemptResult>((resolve, reject) => {
      const waiting: Waiting = { resolve, reject, body, entry: undefined, sending: false };
      this.waiting.set(id, waiting);
      this.send(id, waiting);
    });
    const abort = (): void => {
      this.settle(id, (waiting) => waiting.reject(signal.reason));
    };
    signal.addEventListener("abort", abort, { once: true });
    try {
      return await result;
    } finally {
      signal.removeEventListener("abort", abort);
    }
  }

  /**
   * Adds attempt `id`'s task to the stream. Not awaited: a task lost with the connection is sent
   * again by {@link RedisRollouts.recover}; one the server refuses fails its attempt.
   */
  private send(id: string, waiting: Waiting): void {
    waiting.sending = true;
    this.sender.xAdd(this.keys.tasks, "*", { body: waiting.body }).then(
      (entry) => {
        waiting.entry = entry;
        waiting.sending = false;
      },
      (error: unknown) => {
        waiting.sending = false;
        if (serverAway(error)) this.reconnected();
        else this.settle(id, (it) => it.reject(describeFailure(this.name, error)));
      },
    );
  }

  /** A connection was lost (and may be back): the results loop looks for lost tasks for a while. */
  private reconnected(): void {
    this.recoverUntil = Date.now() + RECOVERY_WINDOW_MS;
    this.nextSweep = 0;
    this.missingSince.clear();
  }

  /**
   * After a reconnection: creates the group, the session key and its fingerprint again if the
   * server lost them (in one transaction, as at the start), and sends again the tasks waiting
   * whose entries are gone without a result and that no worker's heartbeat says it runs, for
   * {@link CONFIRM_MS} (a worker that answers deletes its task's entry in the transaction that
   * writes the result, so a task gone with no result in the results stream was lost). A task
   * answered meanwhile and sent again only gives a duplicate result, which is ignored.
   */
  private async recover(): Promise<void> {
    const { redis, keys } = this;
    await keys.ensureGroup(redis);
    await redis
      .multi()
      .set(keys.fingerprint(this.session), this.fingerprint, { NX: true })
      .set(keys.session, this.session, { NX: true })
      .exec();
    const candidates = [...this.waiting].filter(([, waiting]) => !waiting.sending);
    const running = new Set((await readHeartbeats(redis, keys)).flatMap((health) => health.entries ?? []));
    const present = await Promise.all(
      candidates.map(async ([, { entry }]) =>
        entry === undefined
          ? false
          : running.has(entry) || ((await redis.xRange(keys.tasks, entry, entry)) ?? []).length > 0,
      ),
    );
    for (const [index, [id]] of candidates.entries()) if (present[index]) this.missingSince.delete(id);
    const missing = candidates.filter((_, index) => !present[index]);
    if (missing.length === 0) return;
    const answered = new Set<string>();
    for (const result of (await redis.xRange(keys.results(this.session), "-", "+")) ?? [])
      if (result) answered.add(resultId(String(result.message.body)));
    let sent = 0;
    const now = Date.now();
    for (const [id, waiting] of missing) {
      if (this.waiting.get(id) !== waiting || answered.has(id) || waiting.sending) continue;
      const since = this.missingSince.get(id) ?? now;
      this.missingSince.set(id, since);
      if (now - since < CONFIRM_MS) continue;
      this.missingSince.delete(id);
      this.send(id, waiting);
      sent++;
    }
    if (sent > 0)
      this.say(
        `the Redis server ${this.name} lost ${sent} task(s) waiting for a result (restarted without persistence?): sent them again`,
      );
  }

  /** Hands attempt `id`'s waiter to `action` and forgets it; false when it was settled already. */
  private settle(id: string, action: (waiting: Waiting) => void): boolean {
    const waiting = this.waiting.get(id);
    if (!waiting) return false;
    this.waiting.delete(id);
    action(waiting);
    return true;
  }

  /**
   * Reads the session's results stream until closed. A server that is away is waited for (the
   * client reconnects); one that refuses the read fails every attempt waiting.
   */
  private async readResults(): Promise<void> {
    const stream = this.keys.results(this.session);
    let last = "0-0";
    while (!this.closed) {
      let replies;
      try {
        if (Date.now() < this.recoverUntil && Date.now() >= this.nextSweep) {
          this.nextSweep = Date.now() + SWEEP_MS;
          await this.recover();
        }
        replies = await this.reader.xRead({ key: stream, id: last }, { BLOCK: READ_BLOCK_MS, COUNT: 256 });
      } catch (error) {
        if (this.closed) return;
        if (serverAway(error)) {
          this.reconnected();
          await sleep(RETRY_MS);
          continue;
        }
        this.failure = describeFailure(this.name, error);
        for (const id of [...this.waiting.keys()]) this.settle(id, (waiting) => waiting.reject(this.failure));
        return;
      }
      const read = last;
      for (const reply of (replies ?? []) as Array<{ messages: Array<{ id: string; message: { body?: string } }> }>)
        for (const message of reply.messages) {
          last = message.id;
          const read = readResult(message.message.body);
          if (read.ok) this.accept(read.value);
          else this.deadLetter(stream, message.id, message.message.body, read.problem);
        }
      // What was read is not needed again: the stream keeps only the last entry read. Not
      // awaited: the next read need not wait for it.
      if (last !== read) this.redis.xTrim(stream, "MINID", last).catch(() => undefined);
    }
  }

  /** Moves a result that is not a nexrl result message to the dead-letter stream (saying so the first time). */
  private deadLetter(stream: string, entry: string, body: unknown, problem: string): void {
    // Not awaited: a dead letter lost with the connection is no loss.
    moveToDeadLetters(this.redis, this.keys, stream, entry, body, problem)
      .exec()
      .catch(() => undefined);
    if (this.deadLettered++ === 0)
      this.say(
        `result ${entry} is not a nexrl result message (${problem}): moved to the dead-letter stream ${this.keys.deadLetters}; later ones are moved without a word, counted in workers/dead_letters`,
      );
  }

  /** The messages moved to the dead-letter stream (by the driver or a worker) since the last call (or the start). */
  async takeDeadLetters(): Promise<number> {
    const count = Number((await this.whenAnswered(() => this.redis.get(this.keys.deadLetterCount))) ?? 0);
    // A server that restarted without persistence counts from 0 again.
    const taken = count >= this.deadLettersSeen ? count - this.deadLettersSeen : count;
    this.deadLettersSeen = count;
    return taken;
  }

  /** Settles the attempt `result` answers, once. */
  private accept(result: ResultMessage): void {
    const settled = this.settle(result.id, (waiting) => {
      if (result.ok) waiting.resolve({ trajectories: result.trajectories, unknownTokenIds: result.unknownTokenIds });
      else waiting.reject(failureError(result.error, result.worker));
    });
    if (!settled) return void this.counts.duplicates++;
    this.counts.tasks++;
    if (!result.ok) this.counts.failures++;
    if (result.deliveries > 1) this.counts.reclaimed++;
  }
}

/** The attempt id of a result message's text ("" when it has none). */
function resultId(body: string): string {
  try {
    const id = (decode<{ id?: unknown } | null>(body) ?? {}).id;
    return typeof id === "string" ? id : "";
  } catch {
    return "";
  }
}

function noCounts(): ResultCounts {
  return { tasks: 0, failures: 0, duplicates: 0, reclaimed: 0 };
}
