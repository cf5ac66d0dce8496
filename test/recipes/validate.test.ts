/**
 * `nexrl validate` as a dry run: every shipped recipe passes it, and it catches the start-up
 * failures a run would otherwise meet only after loading (issue 15).
 */
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { RecipeError } from "../../src/errors.js";
import { checkRecipe } from "../../src/run/preflight.js";
import { provideBuiltins } from "../../src/builtins.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { root, runNexrl } from "../support/runs.js";

// checkRecipe is internal: plug in the agent service as the package root does.
provideBuiltins(() => import("../../src/index.js"));

const RECIPES = join(root, "recipe");

/** Every shipped recipe: the YAML files but the `common.yaml` others include, and the `.ts` modules that export a recipe. */
const shipped = readdirSync(RECIPES, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .flatMap((entry) =>
    readdirSync(join(RECIPES, entry.name))
      .filter(
        (name) =>
          (name.endsWith(".yaml") && name !== "common.yaml") ||
          (name.endsWith(".ts") &&
            readFileSync(join(RECIPES, entry.name, name), "utf8").includes("export default defineRecipe(")),
      )
      .map((name) => `${entry.name}/${name}`),
  )
  .sort();

/** Shipped recipes whose reward model another recipe trains first, with the sampler path they name. */
const NEEDS_FIRST: Record<string, string> = {
  "preference/local_grpo_rm.yaml": "runs/rm/sampler_weights/step_000200.nxw",
};

let snapshot: Promise<string> | undefined;
/** A sampler snapshot of the untrained tiny model, saved once (in a folder removed after the tests). */
function rewardModel(): Promise<string> {
  snapshot ??= (async () => {
    const service = new LocalTrainingService({ outputDir: snapshotDir, seed: 0 });
    const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const path = (await (await client.saveWeightsForSampler("rm")).result()).path;
    await service.close();
    return path;
  })();
  return snapshot;
}

let cache: string;
let snapshotDir: string;
let previousCache: string | undefined;
beforeAll(async () => {
  // An empty tokenizer cache: the remote recipes' tokenizers are not there, and are not downloaded.
  cache = await mkdtemp(join(tmpdir(), "nexrl-validate-cache-"));
  snapshotDir = await mkdtemp(join(tmpdir(), "nexrl-validate-rm-"));
  previousCache = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
});
afterAll(async () => {
  if (previousCache === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = previousCache;
  await rm(cache, { recursive: true, force: true });
  await rm(snapshotDir, { recursive: true, force: true });
});

describe("validate on every shipped recipe", () => {
  it("finds the YAML and TS recipes of agent_tools, chat_sft, math, pig_latin and preference", () => {
    expect(shipped).toEqual([
      "agent_tools/local.yaml",
      "agent_tools/sft_local.ts",
      "agent_tools/tinker.yaml",
      "agent_tools/weaver.yaml",
      "chat_sft/local.yaml",
      "chat_sft/tinker.yaml",
      "chat_sft/weaver.yaml",
      "math/local.yaml",
      "math/sft_local.ts",
      "math/tinker.yaml",
      "math/weaver.yaml",
      "math/weaver_full_ft.yaml",
      "pig_latin/local.yaml",
      "pig_latin/tinker.yaml",
      "pig_latin/weaver.yaml",
      "preference/local.yaml",
      "preference/local_grpo_rm.yaml",
      "preference/local_reward_model.yaml",
    ]);
  });

  for (const name of shipped) {
    it(`${name} passes every check a run makes before its first rollout`, async () => {
      const env = { TINKER_API_KEY: "key-123456789", WEAVER_API_KEY: "key-123456789" };
      // The reward model is trained by another recipe first: a saved snapshot stands in for it here
      // (the next test checks the refusal without it).
      const overrides = name in NEEDS_FIRST ? [`rollout_worker.reward_model.sampler_path=${await rewardModel()}`] : [];
      const recipe = await loadRecipe(join(RECIPES, name), { env, cwd: root, overrides });
      const notes = await checkRecipe(recipe, root, env);
      const { backend, model } = recipe.config.service.train_service;
      if (backend === "local") {
        // An agent module without an evaluator would be noted; the shipped ones all have one.
        expect(notes).toEqual([]);
      } else {
        expect(notes).toEqual([
          `the run will download the tokenizer of ${model} (tokenizer.json, tokenizer_config.json and any chat template) from https://huggingface.co/${model} (revision main) into ${join(cache, "nexrl", "tokenizers", model, "main")}; prompt lengths are checked then`,
          `the context of ${model} is checked against rollout_worker.max_sequence_length when the run connects to ${backend}`,
        ]);
        // A dry run: nothing was downloaded.
        expect(await readdir(cache)).toEqual([]);
      }
    });
  }
});

describe("a recipe that needs another recipe's run first", () => {
  it("preference/local_grpo_rm.yaml is refused until the reward model it names is trained, saying how", async () => {
    const recipe = await loadRecipe(join(RECIPES, "preference/local_grpo_rm.yaml"), { env: {}, cwd: root });
    const path = recipe.config.rollout_worker.reward_model!.sampler_path;
    expect(path).toBe(NEEDS_FIRST["preference/local_grpo_rm.yaml"]);
    const dir = await mkdtemp(join(tmpdir(), "nexrl-validate-rm-"));
    try {
      const error = await checkRecipe(recipe, dir).then(
        () => undefined,
        (e: unknown) => e as RecipeError,
      );
      expect(error).toBeInstanceOf(RecipeError);
      expect(error!.issues.map((i) => i.keyPath)).toEqual(["rollout_worker.reward_model.sampler_path"]);
      expect(error!.issues[0]!.message).toMatch(
        /cannot open "runs\/rm\/sampler_weights\/step_000200\.nxw" .* no such file; .*recipe\/preference\/local_reward_model\.yaml/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("validate catches what used to fail only at start-up", () => {
  const writeRecipe = async (dir: string, name: string, lines: string[]): Promise<string> => {
    const file = join(dir, name);
    await writeFile(file, `${lines.join("\n")}\n`);
    return file;
  };

  it("checks the warm start init: names, as the run would meet it after the warm start", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-validate-init-"));
    try {
      const math = join(RECIPES, "math");
      const pigLatin = join(RECIPES, "pig_latin");
      const lines = (init: string, model = "tiny"): string[] => [
        `defaults: [${pigLatin}/local.yaml, _self_]`,
        `data: {data_files: [${pigLatin}/data/train.jsonl]}`,
        `validate: {data: {data_files: [${pigLatin}/data/val.jsonl]}}`,
        `service: {train_service: {model: ${model}}}`,
        `init: ${init}`,
      ];
      const check = async (file: string): Promise<unknown> =>
        checkRecipe(await loadRecipe(file, { cwd: dir }), dir).catch((error: Error) => error.message);
      const cycle = join(dir, "cycle.yaml");
      await writeRecipe(dir, "cycle.yaml", lines(`{from_recipe: ${cycle}}`));
      const otherModel = await writeRecipe(dir, "other.yaml", lines(`{from_recipe: ${math}/sft_local.ts}`, "small"));
      const missing = await writeRecipe(dir, "missing.yaml", lines("{from_checkpoint: nowhere/step_3}"));
      const good = await writeRecipe(dir, "good.yaml", lines(`{from_recipe: ${math}/sft_local.ts}`));
      expect(await check(cycle)).toBe(
        "init.from_recipe forms a cycle: cycle.yaml → cycle.yaml; a warm-start recipe cannot start from itself",
      );
      expect(await check(otherModel)).toBe(
        `init.from_recipe ${relative(dir, join(math, "sft_local.ts"))} trains local model tiny, but the recipe trains local model small; warm-start the same model`,
      );
      expect(await check(missing)).toMatch(/nowhere\/step_3/);
      expect(await check(good)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a misspelt worker class, an unknown local model, an agent without reward and a sequence beyond the context", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-validate-"));
    try {
      const math = join(RECIPES, "math");
      const pigLatin = join(RECIPES, "pig_latin");
      const agentTools = join(RECIPES, "agent_tools");
      const pigLatinData = [
        `data: {data_files: [${pigLatin}/data/train.jsonl]}`,
        `validate: {data: {data_files: [${pigLatin}/data/val.jsonl]}}`,
      ];
      const misspelt = await writeRecipe(dir, "misspelt.yaml", [
        `defaults: [${math}/sft_local.ts, _self_]`,
        `data: {data_files: [${math}/data/easy_train.jsonl]}`,
        `validate: {data: {data_files: [${math}/data/easy_test.jsonl]}}`,
        `rollout_worker: {custom_rollout_worker_module_path: ${math}/sft_worker.ts, custom_rollout_worker_class_name: MathSFTWorker}`,
      ]);
      const tinyy = await writeRecipe(dir, "tinyy.yaml", [
        `defaults: [${pigLatin}/local.yaml, _self_]`,
        ...pigLatinData,
        "service: {train_service: {model: tinyy}}",
      ]);
      // The agent_tools task without its evaluator: with its declarative agent (as weaver.yaml
      // runs it), which returns no reward, and with its agent module, which could.
      const withoutEvaluator = readFileSync(join(agentTools, "common.yaml"), "utf8")
        .replace(/^ {2}evaluator_module_path: .*\n/m, "")
        .replace(/data\/(train|test)\.jsonl/g, `${agentTools}/data/$1.jsonl`)
        .replace(/(?<=: )agent\.ts/, `${agentTools}/agent.ts`);
      expect(withoutEvaluator).not.toContain("evaluator_module_path");
      const declarative = withoutEvaluator.replace(
        /^ {2}agent_module_path: .*$/m,
        `  nexau_agent_config_path: ${agentTools}/agent_workspace/agent_config.yaml\n  nexau_agent_workspace: ${agentTools}/agent_workspace`,
      );
      await writeFile(join(dir, "declarative.yaml"), declarative);
      await writeFile(join(dir, "module.yaml"), withoutEvaluator);
      const localTiny =
        "service: {train_service: {backend: local, model: tiny, config: {loss_fn: importance_sampling}}}";
      const noReward = await writeRecipe(dir, "no-reward.yaml", ["defaults: [declarative, _self_]", localTiny]);
      const agentReward = await writeRecipe(dir, "agent-reward.yaml", ["defaults: [module, _self_]", localTiny]);
      const tooLong = await writeRecipe(dir, "too-long.yaml", [
        `defaults: [${pigLatin}/local.yaml, _self_]`,
        ...pigLatinData,
        "service: {train_service: {model: tiny}}",
        "rollout_worker: {max_sequence_length: 192}",
      ]);
      const [a, b, c, d] = await Promise.all(
        [misspelt, tinyy, noReward, tooLong].map((file) => runNexrl(["validate", "-c", file], { cwd: dir })),
      );
      expect([a!.code, a!.stdout]).toEqual([EXIT_CODES.invalidRecipe, ""]);
      expect(a!.stderr).toBe(
        `nexrl: invalid recipe\nInvalid recipe ${misspelt}:\n  - rollout_worker.custom_rollout_worker_module_path: ${math}/sft_worker.ts has no export \`MathSFTWorker\`; its exports are \`MathSftWorker\`; did you mean \`MathSftWorker\`?\n`,
      );
      expect([b!.code, b!.stdout]).toEqual([EXIT_CODES.invalidRecipe, ""]);
      expect(b!.stderr).toBe(
        `nexrl: invalid recipe\nInvalid recipe ${tinyy}:\n  - service.train_service.model: "tinyy" is not a model of the local engine; did you mean "tiny"? its presets are tiny, small, medium, large\n`,
      );
      expect([c!.code, c!.stdout]).toEqual([EXIT_CODES.invalidRecipe, ""]);
      expect(c!.stderr).toBe(
        "nexrl: the recipe loads, but a run of it would fail at start-up:\nrollout_worker: the declarative agent of nexau_agent_config_path returns no reward and no evaluator is set, so no episode could be scored; set rollout_worker.evaluator_module_path: file.ts:evaluate (a function (data, target) => { reward }) or a class extending Evaluator\n",
      );
      expect([d!.code, d!.stdout]).toEqual([EXIT_CODES.invalidRecipe, ""]);
      expect(d!.stderr).toBe(
        "nexrl: the recipe loads, but a run of it would fail at start-up:\nrollout_worker.max_sequence_length (192) is longer than the context of model tiny (128 tokens); lower it, with max_response_length and max_prompt_length to fit\n",
      );

      // Fixed, each passes; an agent module without an evaluator is noted, not refused.
      const fixed = await Promise.all(
        [
          [misspelt, "rollout_worker.custom_rollout_worker_class_name=MathSftWorker"],
          [tinyy, "service.train_service.model=small"],
          [agentReward],
          [
            tooLong,
            "rollout_worker.max_sequence_length=128",
            "rollout_worker.max_response_length=60",
            "data.max_prompt_length=60",
            "validate.data.max_prompt_length=60",
          ],
        ].map(([file, ...overrides]) => runNexrl(["validate", "-c", file!, ...overrides], { cwd: dir })),
      );
      for (const [i, run] of fixed.entries()) {
        expect([i, run.code, run.stderr]).toEqual([i, EXIT_CODES.ok, ""]);
        expect(run.stdout).toMatch(/^recipe ok: /);
      }
      expect(fixed[2]!.stdout).toContain(
        "  note: rollout_worker: no evaluator_module_path, so each episode's reward must be the `reward` the agent returns ({ final_answer, reward }); an episode without one fails\n",
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
