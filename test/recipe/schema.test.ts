import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_LOCAL_MODEL, loadRecipe, type RecipeConfig } from "../../src/recipe/index.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

/** Loads `yaml` (with a train.jsonl beside it). */
async function load(yaml: string, overrides: string[] = [], env: Record<string, string> = {}): Promise<RecipeConfig> {
  const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": yaml });
  return (await loadRecipe(join(dir, "r.yaml"), { overrides, env })).config;
}

/** Loads `yaml` expecting a RecipeError; returns its issues as `keyPath: message` lines. */
async function problems(yaml: string, overrides: string[] = [], env: Record<string, string> = {}): Promise<string[]> {
  const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": yaml });
  const error = await recipeError(loadRecipe(join(dir, "r.yaml"), { overrides, env }));
  return error.issues.map((issue) => `${issue.keyPath}: ${issue.message}`);
}

describe("recipe schema", () => {
  it("fills our defaults", async () => {
    const config = await load(MINIMAL_YAML);
    expect(config).toMatchObject({
      project_name: "nexrl",
      launch_mode: "local",
      logger: { backend: ["console"] },
      resume: { mode: "disable", resume_path: "", resume_dataloader: true },
      data: {
        type: "torch",
        batch_size: 32,
        keep_batch_order: true,
        rollout_repeat_n: 1,
        prompt_key: "prompt",
        shuffle: false,
        drop_last: false,
        seed: 42,
      },
      validate: { validate_before_train: false, eval: { validate_freq: 0 } },
      rollout_worker: {
        type: "pig_latin",
        num_workers: 4,
        need_llm_inference: false,
        max_response_length: 1024,
        rollout_timeout_seconds: 3600,
        max_rollout_retries: 0,
      },
      trajectory_pool: {
        batch_size: 32,
        group_size: 1,
        key_list: [],
        check_batch_ready_function: "loaded_batch_finished",
      },
      trainer: {
        total_train_steps: 3,
        save_freq: 0,
        save_final: true,
        algorithm: {
          loss_fn: "cross_entropy",
          learning_rate: 1e-4,
          beta1: 0.9,
          beta2: 0.95,
          eps: 1e-8,
          weight_decay: 0.01,
          grad_clip_norm: 1,
          loss_fn_config: {},
        },
      },
      weight: { sync_mode: "sync", staleness_threshold: 0 },
      service: {
        train_service: { identifier: "default", role: "actor", backend: "local", model: "tiny" },
        inference_service: { identifier: "default", backend: "local", model: "tiny" },
      },
      runtime_monitor: { exception_handling: { policy: "stop_on_error" } },
    });
    expect(config.service.train_service).not.toHaveProperty("config");
    expect((await load(MINIMAL_YAML, ["rollout_worker.type=single_turn_math"])).rollout_worker.need_llm_inference).toBe(
      true,
    );
  });

  it("rejects a misspelt key with the file, the key path, the line and a suggestion", async () => {
    const dir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "r.yaml": MINIMAL_YAML.replace("total_train_steps", "total_train_step"),
    });
    const error = await recipeError(loadRecipe(join(dir, "r.yaml")));
    expect(error.message).toBe(
      `Invalid recipe ${join(dir, "r.yaml")}:\n` +
        "  - trainer.total_train_steps: missing; expected a number\n" +
        `  - trainer.total_train_step: unknown key; did you mean \`total_train_steps\`? (set in ${join(dir, "r.yaml")}:7)`,
    );
    expect(error.file).toBe(join(dir, "r.yaml"));
    expect(error.issues[1]).toMatchObject({
      keyPath: "trainer.total_train_step",
      suggestion: "total_train_steps",
      definedIn: `${join(dir, "r.yaml")}:7`,
    });
  });

  it("lists the known keys when nothing is close, and suggests across underscores", async () => {
    expect(await problems(MINIMAL_YAML, ["+trainer.zzz=1", "+rollout_worker.agent_config_path=a.yaml"])).toEqual([
      "rollout_worker.agent_config_path: unknown key; did you mean `nexau_agent_config_path`?",
      "trainer.zzz: unknown key; known keys here: type, total_train_steps, save_freq, save_final, checkpoint_path, sync_weight_path, " +
        "remove_previous_ckpt, custom_trainer_module_path, custom_trainer_class_name, options, teachers, dpo, allow_loss_without_advantages, algorithm",
    ]);
  });

  it("states the expected shape of wrong types and values, all at once", async () => {
    expect(
      await problems(MINIMAL_YAML, [
        "data.batch_size=four",
        "data.seed=1.5",
        "data.shuffle=maybe",
        "data.data_files=train.jsonl",
        "trainer.type=remote_api_grp",
        "weight=sync",
        "rollout_worker.temperature=-1",
        "data.prompt_key=",
        "launch_mode=ray",
      ]),
    ).toEqual([
      'launch_mode: expected "local", got "ray"',
      'data.data_files: expected a list, got "train.jsonl"',
      "data.seed: expected an integer, got 1.5",
      'data.batch_size: expected a number, got "four"',
      'data.prompt_key: expected a non-empty string, got ""',
      'data.shuffle: expected true or false, got "maybe"',
      "rollout_worker.temperature: expected a number >= 0, got -1",
      'trainer.type: expected one of "remote_api_cross_entropy", "remote_api_grpo", "remote_api_opd", "remote_api_dpo", "remote_api_reward_model", "custom", got "remote_api_grp"; did you mean "remote_api_grpo"?',
      'weight: expected a map, got "sync"',
    ]);
  });

  it("requires the sections without defaults", async () => {
    expect(await problems("project_name: x\n")).toEqual([
      "data: missing; expected a map",
      "rollout_worker: missing; expected a map",
      "trainer: missing; expected a map",
      "service: missing; expected a map",
    ]);
  });

  it("names the composed file that last set a key", async () => {
    const dir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "common.yaml": MINIMAL_YAML,
      "local.yaml": "defaults: [common]\ntrainer:\n  total_train_steps: 0\n",
    });
    const error = await recipeError(loadRecipe(join(dir, "local.yaml")));
    expect(error.issues).toEqual([
      {
        keyPath: "trainer.total_train_steps",
        message: "expected a number >= 1, got 0",
        expected: "a number >= 1",
        definedIn: `${join(dir, "local.yaml")}:3`,
      },
    ]);
  });

  it("never prints a secret value in a type error", async () => {
    const yaml = `${MINIMAL_YAML}  inference_service:\n    api_key: 123456789\nlaunch_mode: \${oc.env:MY_TOKEN}\n`;
    const lines = await problems(yaml, [], { MY_TOKEN: "tok-abcdefgh" });
    expect(lines).toEqual([
      'launch_mode: expected "local", got "***"',
      "service.inference_service.api_key: expected a string, got ***",
    ]);
  });
});

describe("cross-section rules", () => {
  it("accepts NexRL's named train-service form and maps error paths back to it", async () => {
    const named = MINIMAL_YAML.replace(
      "  train_service:\n    backend: local\n    model: tiny\n",
      "  train_service:\n    main_actor:\n      backend: local\n      model: tiny\n      role: actor\n",
    );
    expect((await load(named)).service.train_service).toMatchObject({ backend: "local", model: "tiny", role: "actor" });
    expect(await problems(named.replace("backend: local", "backnd: local"))).toEqual([
      'service.train_service.main_actor.backend: missing; expected one of "local", "tinker", "weaver"',
      "service.train_service.main_actor.backnd: unknown key; did you mean `backend`?",
    ]);
    expect(await problems(`${named}    teacher:\n      backend: local\n`)).toEqual([
      "service.train_service: nexrl trains one model: keep one service here (found `main_actor`, `teacher`); teachers of on-policy distillation go in `trainer.teachers`",
    ]);
  });

  it("merges service.train_service.config into trainer.algorithm and reports conflicts", async () => {
    const withConfig = MINIMAL_YAML.replace(
      "    model: tiny\n",
      "    model: tiny\n    config: {learning_rate: 0.001, loss_fn: cross_entropy}\n",
    );
    const config = await load(withConfig, ["+trainer.algorithm={beta2: 0.999, loss_fn: cross_entropy}"]);
    expect(config.trainer.algorithm).toMatchObject({ learning_rate: 0.001, beta2: 0.999, loss_fn: "cross_entropy" });
    expect(await problems(withConfig, ["+trainer.algorithm.learning_rate=0.01"])).toEqual([
      "trainer.algorithm.learning_rate: conflicts with `service.train_service.config.learning_rate` (0.001); set it in one place",
    ]);
    expect(await problems(withConfig, ["service.train_service.config.loss_fn=surrogate"])).toEqual([
      "service.train_service.config.loss_fn: `surrogate` is not available on local (available on: weaver)",
    ]);
  });

  it("requires connection settings for remote backends, naming the variable to use", async () => {
    expect(await problems(MINIMAL_YAML, ["service.train_service.backend=tinker"])).toEqual([
      "service.tinker_service: required for the tinker backend: set `tinker_service.api_key: ${oc.env:TINKER_API_KEY}`",
    ]);
    expect(
      await problems(MINIMAL_YAML, ["service.train_service.backend=weaver", "+service.weaver_service.api_key="]),
    ).toEqual([
      "service.weaver_service.api_key: required for the weaver backend: set `weaver_service.api_key: ${oc.env:WEAVER_API_KEY}`",
    ]);
    expect(
      await problems(MINIMAL_YAML, [
        "+service.inference_service.backend=vllm",
        "+service.inference_service.identifier=student",
      ]),
    ).toEqual([
      'service.inference_service.identifier: must equal `service.train_service.identifier` ("default"), which routes trajectories and weight syncs',
      "service.inference_service.base_url: required when `backend` is `vllm`: the server's base URL",
    ]);
    expect(await problems(MINIMAL_YAML, ["+service.inference_service.backend=tinker"])).toEqual([
      'service.inference_service.backend: the tinker sampler cannot serve weights trained on local; use "local" or an OpenAI-compatible server',
      "service.tinker_service: required for the tinker backend: set `tinker_service.api_key: ${oc.env:TINKER_API_KEY}`",
    ]);
  });

  it("trains the documented default preset with backend: local and no model; names it when a remote backend has none", async () => {
    const withoutModel = MINIMAL_YAML.replace("    model: tiny\n", "");
    expect(withoutModel).not.toContain("model:");
    const config = await load(withoutModel);
    expect(DEFAULT_LOCAL_MODEL).toBe("small");
    expect(config.service.train_service.model).toBe("small");
    expect(config.service.inference_service.model).toBe("small");
    // The inference service's model, when given, is still the one trained.
    expect((await load(withoutModel, ["+service.inference_service.model=medium"])).service.train_service.model).toBe(
      "medium",
    );
    expect(
      await problems(withoutModel, ["service.train_service.backend=tinker", "+service.tinker_service.api_key=k"]),
    ).toEqual([
      "service.train_service.model: required for the tinker backend: the base model to train, e.g. Qwen/Qwen3-8B (or set `service.inference_service.model`); only `backend: local` has a default model (the `small` preset)",
    ]);
  });

  it("takes service.train_service.wire for the tinker backend only", async () => {
    const tinker = ["service.train_service.backend=tinker", "+service.tinker_service.api_key=tml-k"];
    expect(
      (await load(MINIMAL_YAML, [...tinker, "+service.train_service.wire=protobuf"])).service.train_service.wire,
    ).toBe("protobuf");
    expect((await load(MINIMAL_YAML, tinker)).service.train_service.wire).toBeUndefined();
    expect(await problems(MINIMAL_YAML, [...tinker, "+service.train_service.wire=grpc"])).toEqual([
      'service.train_service.wire: expected one of "auto", "json", "protobuf", got "grpc"',
    ]);
    expect(await problems(MINIMAL_YAML, ["+service.train_service.wire=json"])).toEqual([
      "service.train_service.wire: only the tinker backend has wire generations; remove it for the local backend",
    ]);
  });

  it("checks batching against the sync mode, and lengths against each other", async () => {
    expect(await problems(MINIMAL_YAML, ["+weight.sync_mode=fully-async"])).toEqual([
      "data.keep_batch_order: must be false when `weight.sync_mode` is `fully-async`",
      "trajectory_pool.check_batch_ready_function: must be `batch_size_reached` when `weight.sync_mode` is `fully-async`",
    ]);
    expect(
      await load(MINIMAL_YAML, [
        "+weight.sync_mode=fully-async",
        "+data.keep_batch_order=false",
        "+trajectory_pool.check_batch_ready_function=batch_size_reached",
      ]),
    ).toBeDefined();
    expect(
      await problems(MINIMAL_YAML, [
        "+rollout_worker.max_response_length=100",
        "+data.max_response_length=99",
        "+service.inference_service.max_tokens=${rollout_worker.max_response_length}",
        "+rollout_worker.max_sequence_length=1000",
        "+weight.validate_freq=3",
        "+weight.sync_method=tinker",
      ]),
    ).toEqual([
      "data.max_response_length: must equal `rollout_worker.max_response_length` (100); write `${rollout_worker.max_response_length}`",
      "rollout_worker.max_sequence_length: must be at least the prompt length plus `max_response_length` (1124)",
      "weight.validate_freq: must equal `validate.eval.validate_freq` (0); write `${validate.eval.validate_freq}` or drop it",
      'weight.sync_method: must be "local" (the training backend) or left out',
    ]);
  });

  it("requires what each type needs", async () => {
    expect(
      await problems(MINIMAL_YAML, [
        "rollout_worker.type=custom",
        "trainer.type=custom",
        "+validate.validate_before_train=true",
        "+resume.mode=from_path",
      ]),
    ).toEqual([
      "resume.resume_path: required when `mode` is `from_path`: the checkpoint to resume from",
      "validate.data: required when validation is on (`validate_before_train` or `eval.validate_freq` > 0)",
      "rollout_worker.custom_rollout_worker_module_path: required when `type` is `custom`: the file that exports your rollout worker class",
      "trainer.custom_trainer_module_path: required when `type` is `custom`: the file that exports your trainer class",
    ]);
    expect(
      await problems(MINIMAL_YAML, [
        "rollout_worker.type=nexau",
        "trainer.type=remote_api_opd",
        "data.type=torch",
        "data.data_files=[]",
      ]),
    ).toEqual([
      "data.data_files: required when `type` is `torch`: list the task files, e.g. `[data/train.jsonl]`",
      "rollout_worker.nexau_agent_config_path: required when `type` is `nexau`",
      "rollout_worker.evaluator_module_path: required when `type` is `nexau`",
      "trainer.teachers: required when `type` is `remote_api_opd`: e.g. `[{base_model: Qwen/Qwen3-32B}]`",
    ]);
  });
});
