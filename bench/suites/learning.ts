/**
 * Whether the shipped demos learn on the embedded engine, and how long they take: the four
 * local recipes run from a clean temporary folder with the one command their READMEs give, each a
 * fresh `nexrl` process timed from spawn to exit. The folder is new, so the warm starts of math
 * and agent_tools (`init.from_recipe`) run inside that command and count in its time.
 *
 * `NEXRL_BENCH_LEARNING=agent_tools` (a comma-separated list of pig_latin, chat_sft, math,
 * agent_tools, preference)
 * runs only those stages; their rows then go to `learning-<stages>.json` (e.g.
 * `learning-agent_tools.json`), leaving the whole suite's `learning.json` as it was.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { reportRow, targetRow, type Row, type Suite, type SuiteContext } from "../lib/suite.js";
import { toolCallSamples } from "../learning/agent-samples.js";
import { curve, rewardGain, runStage, warmStartOf, type StageResult } from "../learning/stage.js";

/** Last and first steps compared for a reward gain. */
const GAIN_STEPS = 5;

/** The stages of the suite, in the order they run. */
const STAGES = ["pig_latin", "chat_sft", "math", "agent_tools", "preference"] as const;

/** The stages `NEXRL_BENCH_LEARNING` selects (all when unset). */
function selectedStages(): Set<string> {
  const value = process.env.NEXRL_BENCH_LEARNING?.trim();
  if (!value) return new Set(STAGES);
  const names = value.split(",").map((name) => name.trim());
  const unknown = names.filter((name) => !(STAGES as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new Error(
      `NEXRL_BENCH_LEARNING names unknown stages: ${unknown.join(", ")}; use some of ${STAGES.join(", ")}`,
    );
  }
  return new Set(names);
}

/** Runs `recipe` in `cwd` as run `tag`, logging it, and records it (and its warm start, if any) in `setup`. */
async function runJob(name: string, cwd: string, recipe: string, tag: string, ctx: SuiteContext): Promise<StageResult> {
  ctx.log(`${name}: ${recipe} (runs/${tag}), load average ${os.loadavg()[0]!.toFixed(1)}`);
  const r = await runStage(cwd, recipe, tag);
  ctx.log(`${name}: took ${r.seconds.toFixed(1)} s, load average ${r.load.after.toFixed(1)}`);
  const warm = await warmStartOf(r.runDir);
  ctx.setup(name, {
    command: r.command,
    seconds: Math.round(r.seconds * 10) / 10,
    load_average_1m: r.load,
    steps: r.metrics.filter((row) => row.step! > 0).length,
    reward_curve: curve(r.metrics, "rollout/reward_mean").filter((_, i, all) => i % 10 === 0 || i === all.length - 1),
    validation: curve(r.metrics, "val/reward_mean"),
    ...(warm && { warm_start: warm }),
  });
  return r;
}
export const suite: Suite = {
  description:
    "the local demos learn: pig_latin validation word accuracy, the chat_sft validation NLL fall, math and agent_tools reward gains and the preference recipe's dpo/accuracy gain (last 5 vs first 5 steps), wall times with warm starts",
  async *run(ctx): AsyncIterable<Row> {
    const stages = selectedStages();
    const cwd = await mkdtemp(path.join(os.tmpdir(), "nexrl-bench-learning-"));
    ctx.setup("stages", [...stages]);
    ctx.setup("folder", "a fresh temporary folder per run of the suite: each recipe writes runs/<tag>/ there");
    ctx.setup("gain", `mean rollout/reward_mean of the last ${GAIN_STEPS} steps minus that of the first ${GAIN_STEPS}`);
    try {
      if (stages.has("pig_latin")) yield* pigLatin(cwd, ctx);
      if (stages.has("chat_sft")) yield* chatSft(cwd, ctx);
      if (stages.has("math")) yield* math(cwd, ctx);
      if (stages.has("agent_tools")) yield* agentTools(cwd, ctx);
      if (stages.has("preference")) yield* preference(cwd, ctx);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  },
  resultName() {
    const stages = selectedStages();
    return stages.size === STAGES.length ? "learning" : `learning-${[...stages].join("-")}`;
  },
};

/** The README's main job: validation word accuracy at its end, and its wall time. */
async function* pigLatin(cwd: string, ctx: SuiteContext): AsyncIterable<Row> {
  const pig = await runJob("pig_latin", cwd, "recipe/pig_latin/local.yaml", "pig", ctx);
  const accuracy = pig.metrics.at(-1)!["val/reward_mean"];
  if (accuracy === undefined) throw new Error("the pig_latin run did not validate at its last step");
  yield targetRow("pig_latin_val_word_accuracy", "accuracy", accuracy, { op: ">=", bound: 0.5 });
  yield targetRow("pig_latin_wall_s", "s", pig.seconds, { op: "<=", bound: 300 });
}

/** The chat SFT recipe (the built-in `sft` worker): how far its validation NLL falls from before training to its end, and its wall time. */
async function* chatSft(cwd: string, ctx: SuiteContext): AsyncIterable<Row> {
  const run = await runJob("chat_sft", cwd, "recipe/chat_sft/local.yaml", "chat", ctx);
  const nll = curve(run.metrics, "val/nll");
  ctx.setup("chat_sft_val_nll", nll);
  const [first, last] = [nll[0], nll.at(-1)];
  if (first === undefined || last === undefined || nll.length < 2)
    throw new Error("the chat_sft run did not report val/nll before and after training");
  yield targetRow("chat_sft_val_nll_fall", "fraction", 1 - last[1] / first[1], { op: ">=", bound: 0.3 });
  yield reportRow("chat_sft_val_nll_first", "nats/token", first[1]);
  yield reportRow("chat_sft_val_nll_last", "nats/token", last[1]);
  yield targetRow("chat_sft_wall_s", "s", run.seconds, { op: "<=", bound: 60 });
}

/** The math recipe: its reward gain and wall time, warm start included. */
async function* math(cwd: string, ctx: SuiteContext): AsyncIterable<Row> {
  const run = await runJob("math", cwd, "recipe/math/local.yaml", "math", ctx);
  const mathGain = rewardGain(run.metrics, GAIN_STEPS);
  yield targetRow("math_reward_gain", "reward", mathGain.gain, { op: ">=", bound: 0.3 });
  yield reportRow("math_reward_first5", "reward", mathGain.first);
  yield reportRow("math_reward_last5", "reward", mathGain.last);
  yield targetRow("math_wall_s", "s", run.seconds, { op: "<=", bound: 600 });
}

/** The agent_tools recipe: its reward gain, the tool calls in its samples and its wall time, warm start included. */
async function* agentTools(cwd: string, ctx: SuiteContext): AsyncIterable<Row> {
  const agent = await runJob("agent_tools", cwd, "recipe/agent_tools/local.yaml", "agent", ctx);
  const agentGain = rewardGain(agent.metrics, GAIN_STEPS);
  yield targetRow("agent_tools_reward_gain", "reward", agentGain.gain, { op: ">=", bound: 0.3 });
  yield reportRow("agent_tools_reward_first5", "reward", agentGain.first);
  yield reportRow("agent_tools_reward_last5", "reward", agentGain.last);
  const calls = await toolCallSamples(agent.runDir);
  ctx.setup("agent_tools_tool_call_example", calls.example);
  yield reportRow("agent_tools_samples_with_tool_calls", "fraction", calls.fraction);
  yield targetRow("agent_tools_wall_s", "s", agent.seconds, { op: "<=", bound: 600 });
}

/** The preference recipe (DPO): its `dpo/accuracy` and `dpo/margin` gains and its wall time. */
async function* preference(cwd: string, ctx: SuiteContext): AsyncIterable<Row> {
  const run = await runJob("preference", cwd, "recipe/preference/local.yaml", "dpo", ctx);
  const accuracy = rewardGain(run.metrics, GAIN_STEPS, "dpo/accuracy");
  const margin = rewardGain(run.metrics, GAIN_STEPS, "dpo/margin");
  yield targetRow("preference_dpo_accuracy_gain", "accuracy", accuracy.gain, { op: ">=", bound: 0.2 });
  yield reportRow("preference_dpo_accuracy_first5", "accuracy", accuracy.first);
  yield reportRow("preference_dpo_accuracy_last5", "accuracy", accuracy.last);
  yield reportRow("preference_dpo_margin_first5", "margin", margin.first);
  yield reportRow("preference_dpo_margin_last5", "margin", margin.last);
  yield targetRow("preference_wall_s", "s", run.seconds, { op: "<=", bound: 300 });
}
