/**
 * Runs in its own process (forked by the engine suite) so that its peak RSS counts our engine
 * alone: training steps and a sampling request at the given width (or the `medium` preset, on its
 * own workload), then reports `process.resourceUsage().maxRSS` to the parent. With no argument it
 * reports the peak of the bare runtime (Node and tsx), the floor every process pays.
 */
import process from "node:process";

const TRAIN_STEPS = 3;

const model = process.argv[2];
if (model !== undefined) {
  const { OurEngine } = await import("./ours.js");
  const { MEDIUM, trainingBatch } = await import("./workload.js");
  const engine =
    model === MEDIUM.preset
      ? new OurEngine(MEDIUM.preset, trainingBatch(MEDIUM.batch, MEDIUM.seqLen), MEDIUM.maxTokens)
      : new OurEngine(Number(model));
  for (let i = 0; i < TRAIN_STEPS; i++) engine.trainStep();
  engine.sample();
  await engine.dispose();
}
// maxRSS is in kibibytes.
process.send!({ maxRssMb: process.resourceUsage().maxRSS / 1024 });
