/** Timing helpers: wall-clock milliseconds from `process.hrtime.bigint`, warm-up, medians. */

/** Median of a non-empty list. */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of an empty list");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Per-contender result of {@link sideBySide}. */
export interface Timing {
  /** Median milliseconds per call. */
  medianMs: number;
  /** Median over calls of units of work per second (steps/s, tokens/s). */
  perSecond: number;
  /** Every timed call, in run order. */
  samplesMs: number[];
  /** Units of work of every timed call, in run order. */
  units: number[];
}

/**
 * What a contender that times itself returns: the units of work and the milliseconds the work
 * took, e.g. a baseline in a child process, whose own clock leaves out the pipe's round trip.
 */
export interface SelfTimed {
  units: number;
  ms: number;
}

/**
 * A contender does one unit of benchmark work per call and returns how many units it did
 * (1 for a training step, the tokens generated for a sampling request).
 */
export type Contender = () => number | Promise<number>;

/** A contender that times its own work; see {@link SelfTimed}. */
export type SelfTimedContender = () => SelfTimed | Promise<SelfTimed>;

/**
 * Times several contenders in one interleaved loop: `warmup` untimed rounds, then `runs` timed
 * rounds. Each round calls every contender once, and the order rotates every round, so drift in
 * machine load (other processes on shared cores, GC, thermal) lands on all of them alike rather
 * than on whichever ran last.
 */
export async function sideBySide<K extends string>(
  contenders: Record<K, Contender | SelfTimedContender>,
  options: { warmup: number; runs: number },
): Promise<Record<K, Timing>> {
  const names = Object.keys(contenders) as K[];
  const ms = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  const done = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  for (let round = 0; round < options.warmup + options.runs; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length]!;
      const start = process.hrtime.bigint();
      const result = await contenders[name]();
      const wallMs = Number(process.hrtime.bigint() - start) / 1e6;
      const [units, elapsed] = typeof result === "number" ? [result, wallMs] : [result.units, result.ms];
      if (round >= options.warmup) {
        ms[name].push(elapsed);
        done[name].push(units);
      }
    }
  }
  return Object.fromEntries(
    names.map((n) => {
      const perSecond = median(ms[n].map((elapsed, i) => (done[n][i]! * 1000) / elapsed));
      return [n, { medianMs: median(ms[n]), perSecond, samplesMs: ms[n], units: done[n] }];
    }),
  ) as Record<K, Timing>;
}
