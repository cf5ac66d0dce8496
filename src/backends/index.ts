/**
 * Training services: the interfaces, the three backends (`local`, `tinker`, `weaver`) and
 * {@link createTrainingService}, which picks one by name.
 *
 * @module
 */
import { LocalTrainingService, type LocalTrainingServiceOptions } from "./local/index.js";
import { TinkerTrainingService, type TinkerServiceOptions } from "./tinker/index.js";
import type { TrainingBackend, TrainingService } from "../contracts/training.js";
import { WeaverTrainingService, type WeaverServiceOptions } from "./weaver/index.js";
import { ConfigError } from "../errors.js";

/**
 * Options of {@link createTrainingService}. Each backend reads the ones that concern it: `local`
 * needs `outputDir` (and takes `seed`, `threads`, `kernels`, `engineHosts`); `tinker` and `weaver` take the key, base URL, timeouts,
 * retries and polling, each falling back to `TINKER_*` / `WEAVER_*` environment variables.
 */
export interface TrainingServiceOptions
  extends Partial<LocalTrainingServiceOptions>, TinkerServiceOptions, WeaverServiceOptions {}

/**
 * Creates the training service of `backend`.
 *
 * @example
 * ```ts
 * const service = createTrainingService("tinker", { baseUrl: "http://127.0.0.1:8000" }); // key from TINKER_API_KEY
 * const local = createTrainingService("local", { outputDir: "outputs/run" });
 * ```
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for an unknown backend or `local` without
 * `outputDir`; ConfigError for a remote backend without a key.
 */
export function createTrainingService(backend: TrainingBackend, options: TrainingServiceOptions = {}): TrainingService {
  switch (backend) {
    case "local":
      if (!options.outputDir)
        throw new ConfigError(
          "the local backend needs outputDir: the folder for its checkpoints and sampler snapshots",
        );
      return new LocalTrainingService({
        outputDir: options.outputDir,
        ...(options.seed !== undefined && { seed: options.seed }),
        ...(options.threads !== undefined && { threads: options.threads }),
        ...(options.kernels !== undefined && { kernels: options.kernels }),
        ...(options.engineHosts !== undefined && { engineHosts: options.engineHosts }),
      });
    case "tinker":
      return new TinkerTrainingService(options);
    case "weaver":
      return new WeaverTrainingService(options);
    default:
      throw new ConfigError(`unknown training backend "${String(backend)}"; use local, tinker or weaver`);
  }
}

export * from "../contracts/training.js";
export * from "./custom-loss.js";
export * from "./local/index.js";
export * from "./tinker/index.js";
export * from "./weaver/index.js";
