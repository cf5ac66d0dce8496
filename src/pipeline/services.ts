/**
 * The services a recipe names, opened for a run.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { loadTokenizer } from "../services/inference/tokenizers/load.js";
import { LocalTrainingService } from "../services/training/local/index.js";
import type { TrainingBackend, TrainingService } from "../services/training/types.js";
import type { Tokenizer } from "../types/tokenizer.js";
import { BackendNotAvailableError } from "./errors.js";

/** Options of {@link openTrainingService}. */
export interface OpenTrainingServiceOptions {
  /** The run's output folder (the local engine keeps its checkpoints and snapshots there). */
  outputDir: string;
  /** Seed of model initialisation. */
  seed: number;
}

/**
 * A training service for `backend`. The embedded engine serves `local`; Tinker and Weaver clients
 * are reached through the training-service factory once it is part of nexrl.
 * @throws {@link BackendNotAvailableError} for a backend this build cannot reach.
 */
export function openTrainingService(backend: TrainingBackend, options: OpenTrainingServiceOptions): TrainingService {
  if (backend === "local") return new LocalTrainingService({ outputDir: options.outputDir, seed: options.seed });
  throw new BackendNotAvailableError(
    `the ${backend} training backend is not available yet in this version of nexrl; run the recipe with service.train_service.backend: local (the embedded CPU engine) in the meantime`,
  );
}

/**
 * The tokenizer of the trained model: `rollout_worker.tokenizer`, else
 * `service.inference_service.tokenizer`, else `data.tokenizer_path`, else the model itself (an
 * engine preset selects the byte tokenizer).
 */
export function openTokenizer(config: RecipeConfig): Promise<Tokenizer> {
  const name = config.rollout_worker.tokenizer || config.service.inference_service.tokenizer || config.data.tokenizer_path || config.service.train_service.model;
  return loadTokenizer(name);
}

/**
 * Checks that rollouts can sample through the training service's own sampler.
 * @throws {@link BackendNotAvailableError} for OpenAI-compatible inference servers, which weight
 * sync cannot update yet.
 */
export function checkInferenceBackend(config: RecipeConfig): void {
  const inference = config.service.inference_service.backend;
  if (inference !== config.service.train_service.backend) {
    throw new BackendNotAvailableError(
      `rollouts through an ${inference} inference server are not available yet: weight sync cannot push new weights to it. Leave service.inference_service.backend unset to sample through the training service`,
    );
  }
}
