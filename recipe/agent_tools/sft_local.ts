/**
 * The warm start of the local agent_tools recipe: supervised training of the tiny byte-level
 * model on demonstrations (sft_worker.ts) of an agent with a bad habit: one episode in four
 * calls the right tool and answers with its result, the other three answer at once with a
 * guessed number. The model learns the tool-call format and to copy the tool's result, but mostly
 * guesses, which earns nothing; GRPO (`local.yaml`, whose `init.from_recipe` runs this recipe
 * first) has to find out that calling the tool pays. About 1–3 minutes on 2 cores; its final
 * checkpoint is what `local.yaml` starts from. It also runs alone:
 *
 *   node dist/cli/main.js -m training-service -c recipe/agent_tools/sft_local.ts --run-nexrl --tag agent-sft
 */
import { defineRecipe } from "nexrl";

export default defineRecipe({
  defaults: ["common", "_self_"],
  experiment_name: "agent_tools-sft",
  data: { batch_size: 64, rollout_repeat_n: 1 }, // 16 tool-call demonstrations and 48 guesses per step (sft_worker.ts)
  rollout_worker: {
    type: "custom",
    agent_module_path: null,
    custom_rollout_worker_module_path: "sft_worker.ts",
    custom_rollout_worker_class_name: "ToolsSftWorker",
    need_llm_inference: false,
  },
  trainer: {
    type: "remote_api_cross_entropy",
    total_train_steps: 600,
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
