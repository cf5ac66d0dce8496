/**
 * Worker heartbeats: each `nexrl worker` keeps a key with its counters that expires when it stops
 * beating; the driver counts the keys alive.
 * @module
 */
import { appendAll } from "../wire/arrays.js";
import type { Redis, StreamKeys } from "./redis.js";

/** What a worker reports in its heartbeat. */
export interface WorkerHealth {
  /** The worker's name (`host-pid` unless given). */
  name: string;
  /** Attempts it finished (results written), since it started. */
  tasks: number;
  /** Of those, attempts that failed. */
  failures: number;
  /** Attempts it is running now. */
  running: number;
  /** The task stream entries of those attempts (a driver recovering from a Redis restart does not send them again). */
  entries?: string[];
}

/** Beats for one worker every `intervalMs` until stopped; a key missing three beats expires. */
export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;

  /** @param health read at every beat. @param onBeat also done at every beat. */
  constructor(
    private readonly redis: Redis,
    private readonly keys: StreamKeys,
    private readonly intervalMs: number,
    private readonly health: () => WorkerHealth,
    private readonly onBeat: () => Promise<void>,
  ) {}

  /**
   * Beats now, then every interval; a failed beat is retried at the next one, and no beat starts
   * while the last one waits (for a server that is away).
   */
  async start(): Promise<void> {
    await this.beat();
    let beating = false;
    this.timer = setInterval(() => {
      if (beating) return;
      beating = true;
      this.beat()
        .catch(() => undefined)
        .finally(() => (beating = false));
    }, this.intervalMs);
  }

  /** Stops beating and removes the key (the worker leaves at once). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.redis.del(this.keys.worker(this.health().name)).catch(() => undefined);
  }

  private async beat(): Promise<void> {
    const health = this.health();
    await this.onBeat();
    await this.redis.set(this.keys.worker(health.name), JSON.stringify(health), { PX: 3 * this.intervalMs });
  }
}

/** The health of every worker beating under `keys`, by name. */
export async function readHeartbeats(redis: Redis, keys: StreamKeys): Promise<WorkerHealth[]> {
  const names: string[] = [];
  for await (const batch of redis.scanIterator({ MATCH: keys.workers, COUNT: 100 })) appendAll(names, batch);
  if (names.length === 0) return [];
  const values = await redis.mGet(names);
  return values
    .flatMap((value) => (typeof value === "string" ? [JSON.parse(value) as WorkerHealth] : []))
    .sort((a, b) => a.name.localeCompare(b.name));
}
