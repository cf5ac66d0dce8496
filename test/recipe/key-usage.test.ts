/**
 * No recipe key is accepted and then ignored: every key of the schema is listed here with the
 * file that reads it, or with the reason it needs no reader (a value the schema checks and
 * nexrl's behaviour matches), and every value nexrl cannot honour is refused by validation,
 * naming the key. A key added to the schema without an entry here fails the first test.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadRecipe } from "../../src/recipe/index.js";
import { recipeSchema } from "../../src/recipe/schema/recipe.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

/** Minimal view of a zod schema definition, for walking to its keys. */
interface Def {
  type: string;
  shape?: Record<string, { def: Def }>;
  innerType?: { def: Def };
  in?: { def: Def };
  element?: { def: Def };
}

/** Every leaf key path of the schema (`a.b`, `list[].key` for lists of maps). */
function schemaKeys(def: Def, path = ""): string[] {
  const inner = def.innerType ?? def.in;
  if (inner) return schemaKeys(inner.def, path);
  if (def.type === "object")
    return Object.entries(def.shape!).flatMap(([key, value]) => schemaKeys(value.def, path ? `${path}.${key}` : key));
  if (def.type === "array") {
    let element = def.element!.def;
    while (element.innerType ?? element.in) element = (element.innerType ?? element.in)!.def;
    if (element.type === "object") return schemaKeys(element, `${path}[]`);
  }
  return [path];
}

/** Keys read by the code: the file that reads each (it names the key). */
const READ: Record<string, string> = {
  project_name: "src/report/data.ts",
  experiment_name: "src/report/data.ts",
  "logger.backend": "src/run/run-recipe.ts",
  "logger.mlflow.tracking_uri": "src/outputs/loggers/mlflow.ts",
  "logger.mlflow.experiment_name": "src/outputs/loggers/mlflow.ts",
  "logger.mlflow.run_name": "src/outputs/loggers/mlflow.ts",
  "logger.mlflow.tags": "src/outputs/loggers/mlflow.ts",
  "logger.mlflow.flush_timeout_seconds": "src/outputs/loggers/mlflow.ts",
  "logger.wandb.project": "src/outputs/loggers/wandb.ts",
  "logger.wandb.entity": "src/outputs/loggers/wandb.ts",
  "logger.wandb.run_name": "src/outputs/loggers/wandb.ts",
  "logger.wandb.group": "src/outputs/loggers/wandb.ts",
  "logger.wandb.tags": "src/outputs/loggers/wandb.ts",
  "logger.wandb.base_url": "src/outputs/loggers/wandb.ts",
  "logger.wandb.flush_timeout_seconds": "src/outputs/loggers/wandb.ts",
  "accounting.prices.prompt": "src/outputs/accounting.ts",
  "accounting.prices.completion": "src/outputs/accounting.ts",
  "accounting.prices.train": "src/outputs/accounting.ts",
  "resume.mode": "src/run/run-recipe.ts",
  "resume.resume_path": "src/run/preflight.ts",
  "resume.resume_dataloader": "src/run/run-recipe.ts",
  "resume.allow_changed": "src/run/run-recipe.ts",
  "init.from_recipe": "src/run/init-stage.ts",
  "init.from_checkpoint": "src/run/init-stage.ts",
  "data.data_files": "src/run/setup.ts",
  "data.seed": "src/run/setup.ts",
  "data.batch_size": "src/run/setup.ts",
  "data.rollout_repeat_n": "src/run/setup.ts",
  "data.prompt_key": "src/run/setup.ts",
  "data.filter_prompts": "src/run/setup.ts",
  "data.max_prompt_length": "src/run/setup.ts",
  "data.tokenizer_path": "src/run/preflight.ts",
  "data.shuffle": "src/run/setup.ts",
  "data.drop_last": "src/run/setup.ts",
  "validate.validate_before_train": "src/run/training-run.ts",
  "validate.data.data_files": "src/run/setup.ts",
  "validate.data.seed": "src/run/setup.ts",
  "validate.data.batch_size": "src/run/setup.ts",
  "validate.data.rollout_repeat_n": "src/run/setup.ts",
  "validate.data.prompt_key": "src/run/setup.ts",
  "validate.data.filter_prompts": "src/run/setup.ts",
  "validate.data.max_prompt_length": "src/run/setup.ts",
  "validate.data.shuffle": "src/run/setup.ts",
  "validate.data.drop_last": "src/run/setup.ts",
  "validate.eval.validate_freq": "src/run/training-run.ts",
  "rollout_worker.type": "src/workers/registry.ts",
  "rollout_worker.num_workers": "src/run/setup.ts",
  "rollout_worker.need_llm_inference": "src/run/training-run.ts",
  "rollout_worker.temperature": "src/run/setup.ts",
  "rollout_worker.max_response_length": "src/run/setup.ts",
  "rollout_worker.max_sequence_length": "src/run/preflight.ts",
  "rollout_worker.tokenizer": "src/run/preflight.ts",
  "rollout_worker.chat_renderer": "src/run/preflight.ts",
  "rollout_worker.agent_cls": "src/workers/registry.ts",
  "rollout_worker.agent_module_path": "src/agent/worker-class.ts",
  "rollout_worker.agent.max_turns": "src/agent/worker.ts",
  "rollout_worker.agent.max_tokens": "src/agent/worker.ts",
  "rollout_worker.agent.timeout_seconds": "src/agent/worker.ts",
  "rollout_worker.agent.truncated_reward": "src/agent/worker.ts",
  "rollout_worker.agent.trajectory_weight": "src/agent/worker.ts",
  "rollout_worker.agent.replay_answers": "src/recipe/settings.ts",
  "rollout_worker.agent.external": "src/agent/worker-class.ts",
  "rollout_worker.agent.gateway.host": "src/agent/worker-class.ts",
  "rollout_worker.agent.gateway.port": "src/agent/worker-class.ts",
  "rollout_worker.agent.gateway.allowed_hosts": "src/recipe/settings.ts",
  "rollout_worker.agent.gateway.cors": "src/recipe/settings.ts",
  "rollout_worker.nexau_agent_config_path": "src/agent/worker-class.ts",
  "rollout_worker.evaluator_module_path": "src/agent/worker-class.ts",
  "rollout_worker.nexau_agent_workspace": "src/agent/worker-class.ts",
  "rollout_worker.task_name": "src/recipe/settings.ts",
  "rollout_worker.enable_trace_prefix_merge": "src/agent/worker.ts",
  "rollout_worker.custom_rollout_worker_module_path": "src/workers/registry.ts",
  "rollout_worker.custom_rollout_worker_class_name": "src/workers/registry.ts",
  "rollout_worker.options": "src/workers/registry.ts",
  "rollout_worker.rollout_timeout_seconds": "src/run/setup.ts",
  "rollout_worker.agent.math.judge_mode": "src/rewards/math-judge.ts",
  "rollout_worker.sft.train_on": "src/recipe/settings.ts",
  "rollout_worker.judge.base_url": "src/recipe/settings.ts",
  "rollout_worker.reward_model.sampler_path": "src/recipe/settings.ts",
  "rollout_worker.judge.model": "src/rewards/math-judge.ts",
  "rollout_worker.judge.api_key_env": "src/rewards/math-judge.ts",
  "rollout_worker.judge.mode": "src/rewards/math-judge.ts",
  "rollout_worker.judge.rubric": "src/rewards/math-judge.ts",
  "rollout_worker.judge.temperature": "src/recipe/settings.ts",
  "rollout_worker.judge.max_tokens": "src/recipe/settings.ts",
  "rollout_worker.judge.max_concurrency": "src/recipe/settings.ts",
  "rollout_worker.judge.timeout_seconds": "src/recipe/settings.ts",
  "rollout_worker.judge.max_retries": "src/recipe/settings.ts",
  "rollout_worker.judge.cache": "src/rewards/math-judge.ts",
  "rollout_worker.max_rollout_retries": "src/rollouts/failure-policy.ts",
  "rollout_worker.distributed.url": "src/distributed/driver.ts",
  "rollout_worker.distributed.stream_prefix": "src/distributed/driver.ts",
  "rollout_worker.distributed.claim_idle_ms": "src/cli/worker.ts",
  "rollout_worker.distributed.max_deliveries": "src/cli/worker.ts",
  "rollout_worker.distributed.heartbeat_ms": "src/cli/worker.ts",
  "rollout_worker.distributed.inference.host": "src/distributed/inference-relay.ts",
  "rollout_worker.distributed.inference.port": "src/distributed/inference-relay.ts",
  "rollout_worker.distributed.inference.public_host": "src/distributed/inference-relay.ts",
  "trajectory_pool.batch_size": "src/run/run-setup.ts",
  "trajectory_pool.check_batch_ready_function": "src/run/run-setup.ts",
  "trainer.type": "src/algorithms/registry.ts",
  "trainer.total_train_steps": "src/run/training-run.ts",
  "trainer.save_freq": "src/run/training-run.ts",
  "trainer.save_final": "src/run/training-run.ts",
  "trainer.checkpoint_path": "src/run/run-recipe.ts",
  "trainer.remove_previous_ckpt": "src/run/training-run.ts",
  "trainer.custom_trainer_module_path": "src/algorithms/registry.ts",
  "trainer.custom_trainer_class_name": "src/algorithms/registry.ts",
  "trainer.options": "src/algorithms/registry.ts",
  "trainer.teachers[].base_model": "src/algorithms/opd.ts",
  "trainer.dpo.beta": "src/algorithms/dpo.ts",
  "trainer.dpo.reference": "src/algorithms/dpo.ts",
  "trainer.teachers[].checkpoint": "src/algorithms/opd.ts",
  "weight.sync_mode": "src/run/training-run.ts",
  "weight.staleness_threshold": "src/run/run-setup.ts",
  "service.train_service.backend": "src/run/services.ts",
  "service.train_service.model": "src/run/training-run.ts",
  "service.train_service.wire": "src/run/services.ts",
  "service.inference_service.model": "src/agent/worker-class.ts",
  "service.inference_service.backend": "src/run/services.ts",
  "service.inference_service.tokenizer": "src/run/preflight.ts",
  "service.local_service.threads": "src/run/services.ts",
  "service.local_service.kernels": "src/run/services.ts",
  "service.tinker_service.base_url": "src/run/services.ts",
  "service.tinker_service.lora_rank": "src/run/run-setup.ts",
  "service.tinker_service.api_key": "src/run/services.ts",
  "service.weaver_service.base_url": "src/run/services.ts",
  "service.weaver_service.lora_rank": "src/run/run-setup.ts",
  "service.weaver_service.api_key": "src/run/services.ts",
  "service.weaver_service.training_mode": "src/run/run-setup.ts",
  "runtime_monitor.exception_handling.policy": "src/rollouts/failure-policy.ts",
};

/** The hyper-parameters: merged into `trainer.algorithm` from either place, read into the trainers' camelCase `AlgorithmConfig`. */
const HYPER_PARAMETERS: Record<string, string> = {
  loss_fn: "src/recipe/settings.ts",
  loss_fn_config: "src/recipe/settings.ts",
  learning_rate: "src/recipe/settings.ts",
  beta1: "src/recipe/settings.ts",
  beta2: "src/recipe/settings.ts",
  eps: "src/recipe/settings.ts",
  weight_decay: "src/recipe/settings.ts",
  grad_clip_norm: "src/recipe/settings.ts",
  entropy_coeff: "src/recipe/settings.ts",
  kl_penalty_coef: "src/recipe/settings.ts",
  kl_discount_factor: "src/recipe/settings.ts",
};
for (const [key, file] of Object.entries(HYPER_PARAMETERS)) {
  READ[`trainer.algorithm.${key}`] = file;
  READ[`service.train_service.config.${key}`] = file;
}

/** Keys nothing needs to read: the schema accepts only values that say what nexrl does anyway. */
const CHECKED: Record<string, string> = {
  launch_mode: "only `local`: the run is in this process",
  multi_model: "only false: one model per run",
  "logger.enable_feishu_logging": "only false",
  "logger.feishu_url": "refused when set",
  "environment.setup_script": "only empty: no script is run",
  "environment.require_setup_script": "only false",
  "data.type": "only `torch` (the file loader); `mock` is refused",
  "data.keep_batch_order": "must be what weight.sync_mode does",
  "data.max_response_length": "must equal rollout_worker.max_response_length",
  "data.mock_api_type": "refused when set",
  "rollout_worker.distributed.engine": "only `redis`: Redis Streams are the one queue",
  "validate.data.type": "only `torch`",
  "validate.data.keep_batch_order": "refused when set",
  "validate.data.max_response_length": "must equal rollout_worker.max_response_length",
  "validate.data.tokenizer_path": "must be the run's tokenizer",
  "validate.data.mock_api_type": "refused when set",
  "validate.eval.type": "only `default`",
  "rollout_worker.max_prompt_length": "a bound max_sequence_length must leave room for (checked)",
  "rollout_worker.save_trace": "only false",
  "rollout_worker.trace_path": "refused when set",
  "rollout_worker.resource.num_workers": "only 0: no agent pods",
  "rollout_worker.resource.agents_per_worker": "only with num_workers 0, where it counts no pod (as in NexRL)",
  "trajectory_pool.type": "only `default`",
  "trajectory_pool.group_size": "only 1 or data.rollout_repeat_n",
  "trainer.allow_loss_without_advantages": "lets an RL trainer train a supervised loss, refused without it",
  "trajectory_pool.key_list": "only []",
  "trainer.sync_weight_path": "only empty",
  "trainer.teachers[].base_url": "refused when set",
  "trainer.teachers[].api_key": "refused when set",
  "trainer.teachers[].backend": "only the student's backend",
  "weight.type": "only `default`",
  "weight.validate_freq": "must equal validate.eval.validate_freq",
  "weight.sync_method": "must be the training backend",
  "weight.sync_weight_path": "only empty",
  "service.train_service.identifier": "must equal inference_service.identifier (one service pair: a name)",
  "service.train_service.role": "only `actor`",
  "service.inference_service.identifier": "must equal train_service.identifier",
  "service.inference_service.base_url": "required by openai/vllm/sglang (which a run refuses), refused otherwise",
  "service.inference_service.api_key": "refused for a training backend's sampler",
  "service.inference_service.max_tokens": "must equal rollout_worker.max_response_length",
  "service.inference_service.max_retries": "refused for a training backend's sampler",
  "service.inference_service.freeze_for_weight_sync": "only true: syncs switch snapshots at once",
  "service.inference_service.weight_type": "only empty",
  "service.inference_service.model_path": "refused when set",
  "service.inference_service.tool_parser": "SGLang's tool-parser names; overrides the chat template's format",
  "service.inference_service.reasoning_parser": "think_tag, qwen3, deepseek-r1, gpt-oss or none",
  "service.inference_service.parse_tool_call_arguments": "only false",
  "runtime_monitor.exception_handling.enabled": "only true",
  "runtime_monitor.exception_handling.check_interval": "refused when set",
  "runtime_monitor.health_check.enabled": "only false",
  "runtime_monitor.health_check.check_interval": "only with enabled: false",
  "runtime_monitor.health_check.timeout": "only with enabled: false",
  "runtime_monitor.rollout_progress_monitor.enabled": "only false",
  "runtime_monitor.rollout_progress_monitor.update_interval": "only with enabled: false",
  "runtime_monitor.rollout_progress_monitor.log_interval": "only with enabled: false",
  "runtime_monitor.rollout_progress_monitor.use_tqdm": "only with enabled: false",
};

/** A value validation refuses: the overrides that set it, the key path named, and words of the message. */
interface Refusal {
  overrides: string[];
  keyPath: string;
  says: string;
}

const VAL = "++validate.data={data_files: [train.jsonl]";
const JUDGE = "{base_url: 'http://127.0.0.1:9/v1', model: judge}";
const REDIS = "{engine: redis, url: 'redis://127.0.0.1:6379'";
const REFUSED: Refusal[] = [
  {
    overrides: [`++rollout_worker.distributed=${REDIS}, claim_idle: 5}`],
    keyPath: "rollout_worker.distributed.claim_idle",
    says: "did you mean `claim_idle_ms`?",
  },
  {
    overrides: [`++rollout_worker.distributed=${REDIS}, claim_idle_ms: 1000, heartbeat_ms: 800}`],
    keyPath: "rollout_worker.distributed.claim_idle_ms",
    says: "less than twice heartbeat_ms (800 ms)",
  },
  {
    overrides: ["++rollout_worker.distributed={engine: redis, url: 'http://127.0.0.1:6379'}"],
    keyPath: "rollout_worker.distributed.url",
    says: "not a Redis URL: write redis://",
  },
  {
    overrides: ["++rollout_worker.distributed={engine: kafka, url: 'redis://127.0.0.1:6379'}"],
    keyPath: "rollout_worker.distributed.engine",
    says: "redis",
  },
  {
    overrides: [
      "rollout_worker.type=agent",
      "++rollout_worker.agent={external: true, gateway: {port: 8765}}",
      `++rollout_worker.distributed=${REDIS}}`,
    ],
    keyPath: "rollout_worker.distributed",
    says: "external agents claim their tasks from this process's agent gateway",
  },
  {
    overrides: ["rollout_worker.type=agent", "++rollout_worker.agent={gateway: {cors: ['localhost:3000']}}"],
    keyPath: "rollout_worker.agent.gateway.cors[0]",
    says: "an origin such as http://localhost:3000",
  },
  { overrides: ["++multi_model=true"], keyPath: "multi_model", says: "one model per run" },
  {
    overrides: ["++logger.mlflow={run_name: x}"],
    keyPath: "logger.mlflow",
    says: "add mlflow to logger.backend or remove logger.mlflow",
  },
  {
    overrides: ["logger.backend=[wandb]", "++logger.wandb={projekt: x}"],
    keyPath: "logger.wandb.projekt",
    says: "project",
  },
  {
    overrides: [
      "logger.backend=[mlflow]",
      `++logger.mlflow={tags: {${Array.from({ length: 91 }, (_, i) => `t${i}: v`).join(", ")}}}`,
    ],
    keyPath: "logger.mlflow.tags",
    says: "at most 90 tags",
  },
  {
    overrides: ["logger.backend=[mlflow]", "++logger.mlflow={tracking_uri: 'file:///tmp/mlruns'}"],
    keyPath: "logger.mlflow.tracking_uri",
    says: "http:// or https://",
  },
  { overrides: ["logger.backend=[swanlab]"], keyPath: "logger.backend[0]", says: "swanlab is not supported" },
  { overrides: ["logger.backend=[consle]"], keyPath: "logger.backend[0]", says: 'did you mean "console"?' },
  {
    overrides: ["++logger.enable_feishu_logging=true"],
    keyPath: "logger.enable_feishu_logging",
    says: "Feishu notifications are not supported",
  },
  { overrides: ["++logger.feishu_url=https://hook.example/x"], keyPath: "logger.feishu_url", says: "Feishu" },
  {
    overrides: ["++environment.setup_script=env.sh"],
    keyPath: "environment.setup_script",
    says: "`source env.sh && nexrl …`",
  },
  {
    overrides: ["++environment.require_setup_script=true"],
    keyPath: "environment.require_setup_script",
    says: "no setup script",
  },
  { overrides: ["++data.type=mock"], keyPath: "data.type", says: "`mock` tasks are not available" },
  { overrides: ["++data.mock_api_type=generate"], keyPath: "data.mock_api_type", says: "`mock` data" },
  { overrides: [`${VAL}, type: mock}`], keyPath: "validate.data.type", says: "`mock` tasks are not available" },
  {
    overrides: [`${VAL}, mock_api_type: completion}`],
    keyPath: "validate.data.mock_api_type",
    says: "`mock` data",
  },
  {
    overrides: [`${VAL}, keep_batch_order: true}`],
    keyPath: "validate.data.keep_batch_order",
    says: "no batch order to keep",
  },
  {
    overrides: [`${VAL}, tokenizer_path: Qwen/Qwen3-8B}`],
    keyPath: "validate.data.tokenizer_path",
    says: "the run's tokenizer",
  },
  {
    overrides: [`${VAL}, max_response_length: 7}`],
    keyPath: "validate.data.max_response_length",
    says: "must equal `rollout_worker.max_response_length`",
  },
  {
    overrides: ["++rollout_worker.sft={train_on: last_assistant_message}"],
    keyPath: "rollout_worker.sft",
    says: "read only by the `sft` worker",
  },
  {
    overrides: ["++rollout_worker.agent.math.judge_mode=llm_judge"],
    keyPath: "rollout_worker.agent.math.judge_mode",
    says: "only the math worker (`single_turn_math`, or `agent` with its built-in agent) judges answers",
  },
  {
    overrides: ["rollout_worker.type=single_turn_math", "++rollout_worker.agent.math.judge_mode=rule+llm_judge"],
    keyPath: "rollout_worker.judge",
    says: "required when `agent.math.judge_mode` is `rule+llm_judge`",
  },
  {
    overrides: ["rollout_worker.type=single_turn_math", `++rollout_worker.judge=${JUDGE}`],
    keyPath: "rollout_worker.judge",
    says: "read only when `agent.math.judge_mode` is `llm_judge` or `rule+llm_judge`",
  },
  {
    overrides: [
      "rollout_worker.type=single_turn_math",
      "++rollout_worker.agent.math.judge_mode=llm_judge",
      `++rollout_worker.judge=${JUDGE.slice(0, -1)}, rubric: 'Grade {{answer}}'}`,
    ],
    keyPath: "rollout_worker.judge.rubric",
    says: "unknown placeholder {{answer}} for mode `score`",
  },
  {
    overrides: [
      "rollout_worker.type=single_turn_math",
      "++rollout_worker.agent.math.judge_mode=llm_judge",
      `++rollout_worker.judge=${JUDGE.slice(0, -1)}, mode: group_rank}`,
      "++data.rollout_repeat_n=8",
      "++rollout_worker.num_workers=4",
    ],
    keyPath: "rollout_worker.num_workers",
    says: "must be at least the group size (8, the largest rollout_repeat_n) with `judge.mode: group_rank`",
  },
  { overrides: ["++rollout_worker.save_trace=true"], keyPath: "rollout_worker.save_trace", says: "samples.jsonl" },
  { overrides: ["++rollout_worker.trace_path=traces"], keyPath: "rollout_worker.trace_path", says: "trace files" },
  {
    overrides: ["++rollout_worker.resource={num_workers: 2, agents_per_worker: 32}"],
    keyPath: "rollout_worker.resource",
    says: "no agent pods",
  },
  {
    overrides: ["++rollout_worker.resource={agents_per_worker: 32}"],
    keyPath: "rollout_worker.resource",
    says: "no agent pods",
  },
  {
    overrides: ["++rollout_worker.custom_rollout_worker_module_path=w.ts"],
    keyPath: "rollout_worker.custom_rollout_worker_module_path",
    says: "read only when `type` is `custom`, and this worker is `pig_latin`",
  },
  {
    overrides: ["++rollout_worker.options={bonus: 1}"],
    keyPath: "rollout_worker.options",
    says: "read only by a custom worker (`type: custom`), and this worker is `pig_latin`",
  },
  {
    overrides: ["++trainer.options={scale: 2}"],
    keyPath: "trainer.options",
    says: "read only by a custom trainer (`type: custom`), and this trainer is `remote_api_cross_entropy`",
  },
  {
    overrides: ["++trajectory_pool.group_size=8"],
    keyPath: "trajectory_pool.group_size",
    says: "is 8, and data.rollout_repeat_n is 1",
  },
  {
    overrides: ["++data.rollout_repeat_n=4", "++trajectory_pool.group_size=2"],
    keyPath: "trajectory_pool.group_size",
    says: "set it to 4 (or 1, or remove it)",
  },
  {
    overrides: ["trainer.type=remote_api_grpo"],
    keyPath: "data.rollout_repeat_n",
    says: "in a group of one, every advantage is 0 and nothing is learned; set it to 2 or more",
  },
  {
    overrides: [
      "trainer.type=remote_api_grpo",
      "++data.rollout_repeat_n=4",
      "++trainer.algorithm={loss_fn: cross_entropy}",
    ],
    keyPath: "trainer.algorithm.loss_fn",
    says: "set `trainer.allow_loss_without_advantages: true`",
  },
  {
    overrides: [
      "trainer.type=remote_api_opd",
      "++trainer.teachers=[{base_model: tiny}]",
      "++service.train_service.config={loss_fn: cross_entropy}",
    ],
    keyPath: "service.train_service.config.loss_fn",
    says: "`cross_entropy` reads no advantages",
  },
  {
    overrides: ["++trainer.allow_loss_without_advantages=true"],
    keyPath: "trainer.allow_loss_without_advantages",
    says: "this trainer is `remote_api_cross_entropy`; remove it",
  },
  { overrides: ["++trajectory_pool.key_list=[group_id]"], keyPath: "trajectory_pool.key_list", says: "does not group" },
  {
    overrides: ["++trainer.sync_weight_path=/w"],
    keyPath: "trainer.sync_weight_path",
    says: "self-hosted weight sync",
  },
  { overrides: ["++weight.sync_weight_path=/w"], keyPath: "weight.sync_weight_path", says: "self-hosted weight sync" },
  {
    overrides: ["++weight.staleness_threshold=2"],
    keyPath: "weight.staleness_threshold",
    says: "in `sync` mode every step trains on rollouts of the weights before it",
  },
  {
    overrides: ["++trainer.custom_trainer_module_path=t.ts"],
    keyPath: "trainer.custom_trainer_module_path",
    says: "read only when `type` is `custom`",
  },
  {
    overrides: ["++trainer.teachers=[{base_model: tiny}]"],
    keyPath: "trainer.teachers",
    says: "read only by `type: remote_api_opd`",
  },
  {
    overrides: ["trainer.type=remote_api_opd", "++trainer.teachers=[{base_model: tiny}, {base_model: small}]"],
    keyPath: "trainer.teachers[1]",
    says: "one teacher",
  },
  {
    overrides: ["trainer.type=remote_api_opd", "++trainer.teachers=[{base_model: tiny, base_url: 'http://x'}]"],
    keyPath: "trainer.teachers[0].base_url",
    says: "a teacher on another service is not supported yet",
  },
  {
    overrides: ["trainer.type=remote_api_opd", "++trainer.teachers=[{base_model: tiny, api_key: k}]"],
    keyPath: "trainer.teachers[0].api_key",
    says: "a teacher on another service",
  },
  {
    overrides: ["trainer.type=remote_api_opd", "++trainer.teachers=[{base_model: tiny, backend: tinker}]"],
    keyPath: "trainer.teachers[0].backend",
    says: "student's local service",
  },
  {
    overrides: ["++trainer.algorithm={entropy_coeff: 0.01}"],
    keyPath: "trainer.algorithm.entropy_coeff",
    says: "the local backend has no entropy bonus",
  },
  {
    overrides: ["++service.train_service.config={entropy_coeff: 0.01}"],
    keyPath: "service.train_service.config.entropy_coeff",
    says: "no entropy bonus",
  },
  {
    overrides: ["trainer.type=remote_api_grpo", "++trainer.algorithm={kl_penalty_coef: 0.05}"],
    keyPath: "trainer.algorithm.kl_penalty_coef",
    says: "read only by remote_api_opd",
  },
  {
    overrides: ["++service.train_service.config={kl_discount_factor: 0.9}"],
    keyPath: "service.train_service.config.kl_discount_factor",
    says: "this trainer is remote_api_cross_entropy",
  },
  {
    overrides: ["++service.inference_service.base_url=http://127.0.0.1:8000/v1"],
    keyPath: "service.inference_service.base_url",
    says: "applies to OpenAI-compatible inference servers",
  },
  {
    overrides: ["++service.inference_service.api_key=not-used-here"],
    keyPath: "service.inference_service.api_key",
    says: "the local sampler is reached through the training service",
  },
  {
    overrides: ["++service.inference_service.max_retries=3"],
    keyPath: "service.inference_service.max_retries",
    says: "OpenAI-compatible",
  },
  {
    overrides: ["++service.inference_service.freeze_for_weight_sync=false"],
    keyPath: "service.inference_service.freeze_for_weight_sync",
    says: "no request meets weights being synced",
  },
  {
    overrides: ["++service.inference_service.weight_type=bf16"],
    keyPath: "service.inference_service.weight_type",
    says: "self-hosted",
  },
  {
    overrides: ["++service.inference_service.model_path=/models/q"],
    keyPath: "service.inference_service.model_path",
    says: "self-hosted",
  },
  {
    overrides: ["++service.inference_service.tool_parser=llama4"],
    keyPath: "service.inference_service.tool_parser",
    says: "unknown tool parser `llama4`; use one of qwen25, hermes, qwen3_coder, llama3, deepseekv3, deepseekv31, gpt-oss, mistral, kimi_k2",
  },
  {
    overrides: ["++service.inference_service.reasoning_parser=think"],
    keyPath: "service.inference_service.reasoning_parser",
    says: "unknown reasoning parser `think`; use one of think_tag, qwen3, deepseek-r1, gpt-oss, none",
  },
  {
    overrides: [
      "++service.inference_service.tool_parser=gpt-oss",
      "++service.inference_service.reasoning_parser=qwen3",
    ],
    keyPath: "service.inference_service.reasoning_parser",
    says: "gpt-oss writes its reasoning in Harmony's analysis channel",
  },
  {
    overrides: [
      "++service.inference_service.tool_parser=llama3",
      "++service.inference_service.reasoning_parser=gpt-oss",
    ],
    keyPath: "service.inference_service.reasoning_parser",
    says: "the llama3 format has none",
  },
  {
    overrides: ["++service.inference_service.parse_tool_call_arguments=true"],
    keyPath: "service.inference_service.parse_tool_call_arguments",
    says: "JSON text",
  },
  {
    overrides: ["++runtime_monitor.exception_handling.enabled=false"],
    keyPath: "runtime_monitor.exception_handling.enabled",
    says: "failures are always handled",
  },
  {
    overrides: ["++runtime_monitor.exception_handling.check_interval=1.0"],
    keyPath: "runtime_monitor.exception_handling.check_interval",
    says: "as it happens",
  },
  {
    overrides: ["++runtime_monitor.health_check={timeout: 5}"],
    keyPath: "runtime_monitor.health_check",
    says: "no actors to health-check",
  },
  {
    overrides: ["++runtime_monitor.rollout_progress_monitor={use_tqdm: true}"],
    keyPath: "runtime_monitor.rollout_progress_monitor",
    says: "one progress line per step",
  },
];

async function recipeDir(): Promise<string> {
  return tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": MINIMAL_YAML, "w.ts": "", "t.ts": "" });
}

describe("every recipe key is read or refused", () => {
  it("lists every key of the schema exactly once, as read or checked", () => {
    const keys = schemaKeys((recipeSchema as unknown as { def: Def }).def);
    expect(keys.length).toBeGreaterThan(150);
    const listed = [...Object.keys(READ), ...Object.keys(CHECKED)];
    expect(listed.filter((key, i) => listed.indexOf(key) !== i)).toEqual([]);
    expect(
      keys.filter((key) => !listed.includes(key)),
      "schema keys nobody reads: read them, or refuse the values nothing honours",
    ).toEqual([]);
    expect(listed.filter((key) => !keys.includes(key))).toEqual([]);
  });

  it("finds each read key named in the file listed as its reader", async () => {
    const missing: string[] = [];
    for (const [key, file] of Object.entries(READ)) {
      const text = await readFile(join(import.meta.dirname, "..", "..", file), "utf8");
      const leaf = key.split(".").pop()!;
      if (!new RegExp(`\\b${leaf}\\b`).test(text)) missing.push(`${key} (${file})`);
    }
    expect(missing).toEqual([]);
  });

  it.each(REFUSED.map((r) => [r.keyPath, r.overrides.join(" "), r] as const))(
    "refuses %s (%s), naming the key",
    async (_path, _overrides, refusal) => {
      const dir = await recipeDir();
      const error = await recipeError(loadRecipe(join(dir, "r.yaml"), { overrides: refusal.overrides, env: {} }));
      const issue = error.issues.find((i) => i.keyPath === refusal.keyPath);
      expect(issue, error.message).toBeDefined();
      expect(issue!.message).toContain(refusal.says);
    },
  );

  it("accepts the values NexRL recipes carry that ask for what nexrl does", async () => {
    const dir = await recipeDir();
    const { config } = await loadRecipe(join(dir, "r.yaml"), {
      env: {},
      overrides: [
        "++multi_model=false",
        "logger.backend=[console,jsonl]",
        "++environment={setup_script: '', require_setup_script: false}",
        "++rollout_worker.resource={num_workers: 0, agents_per_worker: 32}",
        "++rollout_worker.agent.math.judge_mode=rule",
        "++trajectory_pool={group_size: 1, key_list: []}",
        "++trainer.sync_weight_path=",
        "++weight.sync_weight_path=",
        "++service.inference_service={weight_type: '', freeze_for_weight_sync: true, tool_parser: hermes}",
        "++runtime_monitor.health_check={enabled: false, timeout: 5}",
        "++runtime_monitor.rollout_progress_monitor={enabled: false}",
        `${VAL}, tokenizer_path: ''}`,
      ],
    });
    expect(config.logger.backend).toEqual(["console", "jsonl"]);
    expect(config.service.inference_service.tool_parser).toBe("hermes");
  });

  it("accepts a NexRL pool group_size equal to data.rollout_repeat_n, the grouping nexrl does", async () => {
    const dir = await recipeDir();
    const { config } = await loadRecipe(join(dir, "r.yaml"), {
      env: {},
      overrides: ["trainer.type=remote_api_grpo", "++data.rollout_repeat_n=4", "++trajectory_pool.group_size=4"],
    });
    expect(config.trajectory_pool.group_size).toBe(4);
    expect(config.data.rollout_repeat_n).toBe(4);
  });

  it("trains cross_entropy under remote_api_grpo only with trainer.allow_loss_without_advantages", async () => {
    const dir = await recipeDir();
    const { config } = await loadRecipe(join(dir, "r.yaml"), {
      env: {},
      overrides: [
        "trainer.type=remote_api_grpo",
        "++data.rollout_repeat_n=2",
        "++trainer.algorithm={loss_fn: cross_entropy}",
        "++trainer.allow_loss_without_advantages=true",
      ],
    });
    expect(config.trainer.algorithm.loss_fn).toBe("cross_entropy");
  });
});
