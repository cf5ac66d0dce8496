/**
 * The models `nexrl serve`'s OpenAI-compatible endpoints answer for: the engine presets (their
 * initial weights, as a base model) under their names, and every sampler snapshot or checkpoint
 * saved through the Tinker or Weaver protocol under its `tinker://` / `weaver://` path, so
 * rollouts can sample the latest weights by path.
 *
 * @module
 */
import { ByteTokenizer, MODEL_PRESETS } from "../engine/index.js";
import { HostedEngine } from "../engine/engine-host.js";
import { LocalSamplingClient, LocalTrainingService } from "../backends/local/index.js";
import type { SamplingClient } from "../contracts/training.js";
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

/** The OpenAI-compatible endpoints' handler, and how to end the engine hosts of their models. */
export interface OpenAIModels {
  /** Answers the endpoints' requests. */
  handler: OpenAIRequestHandler;
  /** Ends the preset and snapshot samplers' host threads once their calls have run. */
  close(): Promise<void>;
}

/**
 * The OpenAI-compatible handler over `store`. Every preset and snapshot samples in an engine
 * host thread of its own; a snapshot dropped from the loaded ones ends its host.
 * @param store the models and artifacts of the training protocols.
 * @param log receives model failures.
 * @param extra more models, by name, listed after the presets (a run's trained weights).
 */
export async function createOpenAIModelsHandler(
  store: ModelStore,
  log: (line: string) => void,
  extra: Readonly<Record<string, ServedModel>> = {},
): Promise<OpenAIModels> {
  const tokenizer = new ByteTokenizer();
  const compute = store.threads !== undefined ? { threads: store.threads } : {};
  const local = new LocalTrainingService({
    outputDir: store.outputDir,
    seed: store.seed,
    engineHosts: true,
    ...compute,
  });
  const models: Record<string, ServedModel> = {};
  for (const name of Object.keys(MODEL_PRESETS))
    models[name] = { samplingClient: presetClient(local, name), tokenizer };
  Object.assign(models, extra);
  const loaded = new Map<string, Promise<LocalSamplingClient>>();
  const unload = (client: Promise<LocalSamplingClient>): Promise<void> =>
    client.then(
      (c) => c.close(),
      () => undefined,
    );
  const resolveModel = async (name: string): Promise<ServedModel | undefined> => {
    if (!store.hasArtifact(name)) return undefined;
    let client = loaded.get(name);
    if (!client) {
      const { file } = store.artifact(name);
      client = HostedEngine.samplerFromSnapshot(file, compute).then((host) => new LocalSamplingClient(file, host));
      loaded.set(name, client);
      if (loaded.size > LOADED_SNAPSHOTS) {
        const oldest = loaded.keys().next().value!;
        void unload(loaded.get(oldest)!);
        loaded.delete(oldest);
      }
    }
    return { samplingClient: await client, tokenizer };
  };
  return {
    handler: createOpenAIHandler({ models, resolveModel, log }),
    close: async () => {
      await Promise.all([...loaded.values()].map(unload));
      loaded.clear();
      await local.close();
    },
  };
}
