/**
 * The services a recipe names, opened for a run.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { createTrainingService } from "../backends/index.js";
import type { TrainingService } from "../contracts/training.js";
import { RunError } from "../errors.js";

/** Options of {@link openTrainingService}. */
export interface OpenTrainingServiceOptions {
  /** The run's output folder (the local engine keeps its checkpoints and snapshots there). */
  outputDir: string;
  /** Environment of `TINKER_*` / `WEAVER_*` fallbacks. */
  env: Readonly<Record<string, string | undefined>>;
  /** Receives the service's retry and heartbeat warnings. */
  log: (line: string) => void;
}

/**
 * The training service of `service.train_service.backend`: the embedded engine for `local`
 * (models seeded by `data.seed`, threads and kernels from `service.local_service`), else a Tinker or Weaver client with the key and base URL of
 * `service.tinker_service` / `service.weaver_service` (falling back to the environment).
 */
export function openTrainingService(config: RecipeConfig, options: OpenTrainingServiceOptions): TrainingService {
  const backend = config.service.train_service.backend;
  const remote =
    backend === "tinker"
      ? config.service.tinker_service
      : backend === "weaver"
        ? config.service.weaver_service
        : undefined;
  return createTrainingService(backend, {
    outputDir: options.outputDir,
    seed: config.data.seed,
    ...(config.service.local_service?.threads !== undefined && { threads: config.service.local_service.threads }),
    ...(config.service.local_service?.kernels !== undefined && { kernels: config.service.local_service.kernels }),
    env: options.env,
    log: options.log,
    ...(remote?.api_key && { apiKey: remote.api_key }),
    ...(remote?.base_url && { baseUrl: remote.base_url }),
    ...(config.service.train_service.wire && { wire: config.service.train_service.wire }),
  });
}

/**
 * Checks that rollouts can sample through the training service's own sampler.
 * @throws {@link "nexrl/errors".RunError | RunError} for OpenAI-compatible inference servers, which weight
 * sync cannot update yet.
 */
export function checkInferenceBackend(config: RecipeConfig): void {
  const inference = config.service.inference_service.backend;
  if (inference !== config.service.train_service.backend) {
    throw new RunError(
      `rollouts through an ${inference} inference server are not available yet: weight sync cannot push new weights to it. Leave service.inference_service.backend unset to sample through the training service`,
      { code: "backend" },
    );
  }
}
