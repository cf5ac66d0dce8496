/**
 * Training from code: `runRecipe` with overrides, progress, events and Ctrl-C handling.
 *   npm run build && npx tsx examples/run_recipe.ts
 */
import { runRecipe, type RunEvent } from "nexrl";

const controller = new AbortController();
// The first Ctrl-C finishes the step in flight and saves a checkpoint to resume from.
process.once("SIGINT", () => controller.abort());

const onEvent = (event: RunEvent): void => {
  if (event.type === "checkpoint") console.log(`saved ${event.path}`);
};

const result = await runRecipe(new URL("../recipe/pig_latin/local.yaml", import.meta.url).pathname, {
  tag: "pig-latin-from-code",
  overrides: ["trainer.total_train_steps=6", "trainer.save_freq=3", "service.train_service.model=small"],
  signal: controller.signal,
  progress: process.stdout,
  onEvent,
});

const first = result.metrics.find((row) => row.step === 1);
const last = result.metrics.at(-1);
console.log(`${result.stopReason} after ${result.steps} steps in ${result.outputDir}`);
console.log(
  `train/loss ${first?.["train/loss"]?.toFixed(3)} → ${last?.["train/loss"]?.toFixed(3)}; last checkpoint ${result.lastCheckpoint}`,
);
