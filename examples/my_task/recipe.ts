/**
 * The same task as recipe.yaml, as a typed TypeScript recipe, with the built-in GRPO trainer and
 * a validation pass every 2 steps. Run it like a YAML recipe:
 *   npm run build && npx nexrl -m training-service -c examples/my_task/recipe.ts --run-nexrl --tag my-task-ts
 */
import { defineRecipe } from "nexrl";

export default defineRecipe({
  experiment_name: "my_task_grpo",
  data: { data_files: ["data.jsonl"], batch_size: 6, rollout_repeat_n: 4, shuffle: true, max_prompt_length: 32 },
  rollout_worker: {
    type: "custom",
    custom_rollout_worker_module_path: "rollout_worker.ts",
    custom_rollout_worker_class_name: "MyTaskWorker",
    num_workers: 4,
    max_response_length: 8,
    max_sequence_length: 40,
  },
  trainer: { type: "remote_api_grpo", total_train_steps: 4 },
  validate: {
    data: { data_files: ["data.jsonl"], rollout_repeat_n: 2 },
    eval: { validate_freq: 2 },
  },
  service: {
    train_service: {
      backend: "local",
      model: "tiny",
      config: {
        loss_fn: "ppo",
        learning_rate: 1e-3,
        loss_fn_config: { clip_low_threshold: 0.8, clip_high_threshold: 1.2 },
      },
    },
  },
});
