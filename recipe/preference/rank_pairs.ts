/**
 * How often a trained reward model ranks the held-out pairs of `data/val.jsonl` right: the score
 * r(x, y) of the chosen answer above the rejected one's. Give it the run's final sampler
 * snapshot (local backend):
 *
 *   npx tsx recipe/preference/rank_pairs.ts runs/rm/sampler_weights/step_000200.nxw
 *
 * It prints the accuracy and the mean margin r_chosen − r_rejected.
 */
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { createTrainingService } from "nexrl";
import { RewardModelScorer } from "nexrl/algorithms";
import { ByteTokenizer } from "nexrl/engine";

const samplerPath = process.argv[2];
if (samplerPath === undefined) {
  console.error("usage: npx tsx recipe/preference/rank_pairs.ts <sampler path of a remote_api_reward_model run>");
  process.exit(2);
}
const tokenizer = new ByteTokenizer();
const service = createTrainingService("local", { outputDir: tmpdir() });
const scorer = new RewardModelScorer(service.createSamplingClient(samplerPath), tokenizer);
const rows = readFileSync(fileURLToPath(new URL("data/val.jsonl", import.meta.url)), "utf8")
  .trim()
  .split("\n")
  .map((line) => JSON.parse(line) as { prompt: string; chosen: string; rejected: string });
let right = 0;
let margin = 0;
for (const row of rows) {
  const prompt = tokenizer.applyChatTemplate([{ role: "user", content: row.prompt }], { addGenerationPrompt: true });
  const score = (answer: string) => scorer.score([...prompt, ...tokenizer.encode(answer), tokenizer.eosId]);
  const m = (await score(row.chosen)) - (await score(row.rejected));
  margin += m / rows.length;
  if (m > 0) right++;
}
console.log(
  `${right} of ${rows.length} held-out pairs ranked right (accuracy ${(right / rows.length).toFixed(3)}), mean margin ${margin.toFixed(3)}`,
);
await service.close();
