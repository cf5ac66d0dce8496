import { describe, expect, it } from "vitest";
import { ProgressPrinter, RATE_WINDOW_STEPS } from "../../src/outputs/progress.js";

/** A printer on a clock the test moves, and the lines it printed. */
function printer(totalSteps: number) {
  let clock = 0;
  const lines: string[] = [];
  const progress = new ProgressPrinter({ write: (text: string) => lines.push(text) }, totalSteps, {
    now: () => clock,
  });
  const step = (step: number, seconds: number): string => {
    clock += seconds * 1000;
    progress.step(step, { "rollout/reward_mean": 0.5, "train/loss": 1 });
    return lines.at(-1)!;
  };
  return { step };
}

describe("ProgressPrinter", () => {
  it("measures s/step and eta over the recent steps, so a slow first step fades out", () => {
    const { step } = printer(100);
    expect(step(1, 38)).toContain("| 38.0 s/step | eta 62m42s");
    // The second step's rate still includes the first one.
    expect(step(2, 1.6)).toContain("| 19.8 s/step |");
    let line = "";
    for (let s = 3; s <= RATE_WINDOW_STEPS + 1; s++) line = step(s, 1.6);
    // Steps 2..11 are the window: the 38 s start is out of it.
    expect(line).toBe(`step ${RATE_WINDOW_STEPS + 1}/100 | reward 0.500 | loss 1.000 | 1.6 s/step | eta 2m22s\n`);
  });

  it("follows a change of pace within the window", () => {
    const { step } = printer(40);
    for (let s = 1; s <= 20; s++) step(s, 1);
    let line = "";
    for (let s = 21; s <= 20 + RATE_WINDOW_STEPS; s++) line = step(s, 3);
    expect(line).toContain("| 3.0 s/step | eta 30s");
  });
});
