/**
 * The warm start of the local math recipe: supervised training of the tiny byte-level model on
 * the easy curriculum, so that GRPO (`local.yaml`, whose `init.from_recipe` runs this recipe
 * first) starts from a policy that sometimes answers right. About 20 s on 2 cores; its final
 * checkpoint is what `local.yaml` starts from. It also runs alone:
 *
 *   npx nexrl -m training-service -c recipe/math/sft_local.ts --run-nexrl --tag math-sft
 *
 * A TypeScript recipe: the same keys as YAML, checked by the editor through `defineRecipe`.
 */
import { defineRecipe } from "nexrl";

export default defineRecipe({
  defaults: ["common", "_self_"],
  experiment_name: "arithmetic-sft",
  data: {
    data_files: ["data/easy_train.jsonl"],
    batch_size: 32,
    rollout_repeat_n: 1,
  },
  rollout_worker: {
    type: "custom",
    custom_rollout_worker_module_path: "sft_worker.ts",
    custom_rollout_worker_class_name: "MathSftWorker",
    need_llm_inference: false,
  },
  trainer: {
    type: "remote_api_cross_entropy",
    total_train_steps: 120, // stopped early on purpose: see README.md
  },
  validate: {
    validate_before_train: false,
    eval: { validate_freq: 0 },
  },
  service: {
    train_service: {
      backend: "local",
      model: "tiny",
      config: { loss_fn: "cross_entropy", learning_rate: 3e-3 },
    },
  },
});
