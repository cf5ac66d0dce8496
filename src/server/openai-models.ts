/**
 * The models `nexrl serve`'s OpenAI-compatible endpoints answer for: the engine presets (their
 * initial weights, as a base model) under their names, and every sampler snapshot or checkpoint
 * saved through the Tinker or Weaver protocol under its `tinker://` / `weaver://` path, so
 * rollouts can sample the latest weights by path.
 *
 * @module
 */
import { ByteTokenizer, MODEL_PRESETS } from "../engine/index.js";
import { LocalTrainingService } from "../services/training/local/index.js";
import type { SamplingClient } from "../services/training/types.js";
import type { ModelStore } from "./models.js";
import { createOpenAIHandler, type OpenAIRequestHandler, type ServedModel } from "./openai.js";

/** Snapshot samplers kept loaded; older ones are loaded again when asked for. */
const LOADED_SNAPSHOTS = 8;

/**
 * A sampling client of a preset's initial weights that builds its engine on first use, so that a
 * server does not pay every preset's memory and initialisation at start.
 */
function presetClient(local: LocalTrainingService, name: string): SamplingClient {
  let client: Promise<SamplingClient> | undefined;
  const open = (): Promise<SamplingClient> => (client ??= local.createSamplingClient(name));
  return {
    modelPath: name,
    sample: async (prompt, numSamples, params) => (await open()).sample(prompt, numSamples, params),
    computeLogprobs: async (tokens) => (await open()).computeLogprobs(tokens),
  };
}

/**
 * The OpenAI-compatible handler over `store`.
 * @param store the models and artifacts of the training protocols.
 * @param log receives model failures.
 * @param extra more models, by name, listed after the presets (a run's trained weights).
 */
export async function createOpenAIModelsHandler(
  store: ModelStore,
  log: (line: string) => void,
  extra: Readonly<Record<string, ServedModel>> = {},
): Promise<OpenAIRequestHandler> {
  const tokenizer = new ByteTokenizer();
  const local = new LocalTrainingService({
    outputDir: store.outputDir,
    seed: store.seed,
    ...(store.threads !== undefined && { threads: store.threads }),
  });
  const models: Record<string, ServedModel> = {};
  for (const name of Object.keys(MODEL_PRESETS))
    models[name] = { samplingClient: presetClient(local, name), tokenizer };
  Object.assign(models, extra);
  const loaded = new Map<string, Promise<ServedModel>>();
  const resolveModel = (name: string): Promise<ServedModel> | undefined => {
    if (!store.hasArtifact(name)) return undefined;
    let model = loaded.get(name);
    if (!model) {
      const { file } = store.artifact(name);
      model = local.createSamplingClient(file).then((samplingClient) => ({ samplingClient, tokenizer }));
      loaded.set(name, model);
      if (loaded.size > LOADED_SNAPSHOTS) loaded.delete(loaded.keys().next().value!);
    }
    return model;
  };
  return createOpenAIHandler({ models, resolveModel, log });
}
