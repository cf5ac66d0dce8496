/**
 * Runs in its own process (forked by the engine suite) so that its peak RSS counts our engine
 * alone: training steps and a sampling request at the given width, then reports
 * `process.resourceUsage().maxRSS` to the parent. With no width it reports the peak of the bare
 * runtime (Node and tsx), the floor every process pays.
 */
import process from "node:process";

const TRAIN_STEPS = 3;

const width = process.argv[2];
if (width !== undefined) {
  const { OurEngine } = await import("./ours.js");
  const engine = new OurEngine(Number(width));
  for (let i = 0; i < TRAIN_STEPS; i++) engine.trainStep();
  engine.sample();
  engine.dispose();
}
// maxRSS is in kibibytes.
process.send!({ maxRssMb: process.resourceUsage().maxRSS / 1024 });
