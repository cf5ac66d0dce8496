/**
 * Runs in its own process (forked by the engine suite) so that its peak RSS counts our engine
 * alone: training steps and a sampling request at the given width (or a preset, `medium` or
 * `large`, on its own workload), then reports `process.resourceUsage().maxRSS` to the parent. With no argument it
 * reports the peak of the bare runtime (Node and tsx), the floor every process pays.
 */
import process from "node:process";

const TRAIN_STEPS = 3;

const model = process.argv[2];
if (model !== undefined) {
  const { OurEngine } = await import("./ours.js");
  const { LARGE, MEDIUM } = await import("./workload.js");
  const preset = [MEDIUM, LARGE].find((w) => w.preset === model);
  const engine = preset ? OurEngine.forPreset(preset) : new OurEngine(Number(model));
  // The engine allocates all its storage when it is created, so one step of `large` (seconds
  // long) reaches the same peak as three.
  const steps = preset === LARGE ? 1 : TRAIN_STEPS;
  for (let i = 0; i < steps; i++) engine.trainStep();
  engine.sample();
  await engine.dispose();
}
// maxRSS is in kibibytes.
process.send!({ maxRssMb: process.resourceUsage().maxRSS / 1024 });
