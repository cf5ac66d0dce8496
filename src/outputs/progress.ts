/**
 * The human-readable progress of a run: a live line on a terminal, one line per step otherwise.
 * @module
 */

/** Where progress goes: a stream, with `isTTY` true for a live line. */
export interface ProgressOutput {
  /** Writes text. */
  write(text: string): unknown;
  /** True for a terminal. */
  isTTY?: boolean;
}

const fmt = (value: number | undefined, digits = 3): string =>
  value === undefined || !Number.isFinite(value) ? "-" : value.toFixed(digits);

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "-";
  const s = Math.round(seconds);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}

/** Steps the rate and the ETA are measured over: recent ones, so a slow start (loading, the first compile) fades out. */
export const RATE_WINDOW_STEPS = 10;

/** Options of {@link ProgressPrinter}. */
export interface ProgressOptions {
  /** False prints no step lines (`console` missing from `logger.backend`), only messages. */
  steps?: boolean;
  /** False leaves the rollout reward out of the step lines (SFT, whose rows all get the same reward), so that they lead with the loss. */
  reward?: boolean;
  /** The clock, in milliseconds (default `performance.now`). */
  now?: () => number;
}

/**
 * Prints `step 12/40 | reward 0.512 | loss 1.234 | 3.2 s/step | eta 1m30s` (a step that trained
 * nothing says why instead of its loss): rewritten in place on a terminal, one line per step
 * otherwise. `s/step` and `eta` are measured over the last {@link RATE_WINDOW_STEPS} steps.
 * Messages (warnings, checkpoints, validation) print on lines of their own.
 */
export class ProgressPrinter {
  private live = "";
  private readonly now: () => number;
  /** When the printer started, then when each of the recent steps ended (at most the window + 1 times). */
  private readonly times: number[];

  private readonly steps: boolean;
  private readonly reward: boolean;

  /**
   * @param out where to print.
   * @param totalSteps steps the run will take.
   * @param options step lines or none, the reward in them or not (SFT), and the clock.
   */
  constructor(
    private readonly out: ProgressOutput,
    private readonly totalSteps: number,
    options: ProgressOptions = {},
  ) {
    this.steps = options.steps ?? true;
    this.reward = options.reward ?? true;
    this.now = options.now ?? (() => performance.now());
    this.times = [this.now()];
  }

  /** Reports a finished step with its metrics, and why it trained nothing if it did not (`skipped`). */
  step(step: number, metrics: Readonly<Record<string, unknown>>, skipped?: string): void {
    this.times.push(this.now());
    if (this.times.length > RATE_WINDOW_STEPS + 1) this.times.shift();
    if (!this.steps) return;
    const perStep = (this.times.at(-1)! - this.times[0]!) / 1000 / (this.times.length - 1);
    const num = (key: string): number | undefined =>
      typeof metrics[key] === "number" ? (metrics[key] as number) : undefined;
    const line = [
      `step ${step}/${this.totalSteps}`,
      ...(this.reward ? [`reward ${fmt(num("rollout/reward_mean"))}`] : []),
      skipped === undefined ? `loss ${fmt(num("train/loss"))}` : `nothing trained: ${skipped}`,
      ...(num("val/nll") !== undefined ? [`val nll ${fmt(num("val/nll"))}`] : []),
      ...(num("val/reward_mean") !== undefined ? [`val ${fmt(num("val/reward_mean"))}`] : []),
      ...(num("workers/alive") !== undefined
        ? [
            `workers ${num("workers/alive")} (${num("workers/tasks") ?? 0} tasks, ${num("workers/failures") ?? 0} failed)`,
          ]
        : []),
      `${fmt(perStep, 1)} s/step`,
      `eta ${duration(perStep * (this.totalSteps - step))}`,
    ].join(" | ");
    if (this.out.isTTY) {
      this.live = line;
      this.out.write(`\r\x1b[K${line}`);
    } else {
      this.out.write(`${line}\n`);
    }
  }

  /** Prints a message on its own line, keeping the live line below it. */
  message(text: string): void {
    if (this.out.isTTY && this.live) this.out.write(`\r\x1b[K${text}\n${this.live}`);
    else this.out.write(`${text}\n`);
  }

  /** Prints `text` (lines ending with a newline) below everything printed so far. */
  print(text: string): void {
    this.end();
    this.out.write(text);
  }

  /** Ends the live line. */
  end(): void {
    if (this.out.isTTY && this.live) this.out.write("\n");
    this.live = "";
  }
}
