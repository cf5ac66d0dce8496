/**
 * The warm start of the local agent_tools recipe: supervised training of the tiny byte-level
 * model on demonstrations of the tool-call format, so that GRPO (`local.yaml`, whose
 * `init.from_recipe` runs this recipe first) starts from a policy that calls tools. About 3
 * minutes on 2 cores; its final checkpoint is what `local.yaml` starts from. It also runs alone:
 *
 *   node dist/cli/main.js -m training-service -c recipe/agent_tools/sft_local.ts --run-nexrl --tag agent-sft
 */
import { defineRecipe } from "nexrl";

export default defineRecipe({
  defaults: ["common", "_self_"],
  experiment_name: "agent_tools-sft",
  data: { batch_size: 16, rollout_repeat_n: 1 },
  rollout_worker: {
    type: "custom",
    agent_module_path: null,
    custom_rollout_worker_module_path: "sft_worker.ts",
    custom_rollout_worker_class_name: "ToolsSftWorker",
    need_llm_inference: false,
  },
  trainer: {
    type: "remote_api_cross_entropy",
    total_train_steps: 400,
  },
  validate: { validate_before_train: false, eval: { validate_freq: 0 } },
  service: {
    train_service: {
      backend: "local",
      model: "tiny",
      config: { loss_fn: "cross_entropy", learning_rate: 3e-3 },
    },
  },
});
