/**
 * The checks a run makes before its first rollout, shared by `runRecipe` (which keeps what they
 * open) and `nexrl validate` (a dry run: it downloads nothing and starts nothing), so that a
 * recipe `validate` accepts does not fail at start-up for a reason it could see.
 * @module
 */
import { relative, resolve } from "node:path";
import { MODEL_PRESETS } from "../engine/config.js";
import { readStateFile } from "../engine/storage.js";
import { loadRecipe, type LoadedRecipe } from "../recipe/load.js";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { didYouMean } from "../recipe/suggest.js";
import { RecipeError } from "../errors.js";
import { REQUIRED_TOKENIZER_FILES } from "../inference/tokenizers/files.js";
import { loadTokenizer, locateTokenizer, type LoadTokenizerOptions } from "../inference/tokenizers/load.js";
import { serverName } from "../distributed/server-name.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import { readRunState, type RunState } from "../outputs/checkpoint.js";
import { locateRecipeCheckpoint, refuseInitCycle } from "./init-stage.js";
import type { DataLoader } from "../data/data-loader.js";
import { RunError } from "../errors.js";
import { checkInferenceBackend } from "./services.js";
import { openDataLoader } from "./setup.js";
import { checkFirstRows } from "./row-check.js";
import { appendAll } from "../wire/arrays.js";
import { rewardModelPathError } from "../rewards/reward-model.js";
import { workerSettings } from "../recipe/settings.js";
import { isDerivedFrom } from "../brand.js";
import { GrpoTrainer } from "../algorithms/grpo.js";
import { resolveTrainerClass, trainerOptions, type TrainerClass } from "../algorithms/registry.js";
import type { ClassOptions } from "../contracts/options.js";
import {
  checkRolloutWorkerClass,
  resolveRolloutWorkerClass,
  rolloutWorkerOptions,
  rolloutWorkerNotes,
  type RolloutWorkerClass,
} from "../workers/registry.js";

/** How the run's tokenizer is loaded: the chat renderer `rollout_worker.chat_renderer` asks for. */
export function tokenizerOptions(config: RecipeConfig): LoadTokenizerOptions {
  const renderer = config.rollout_worker.chat_renderer;
  return renderer ? { renderer } : {};
}

/**
 * The name the run loads the tokenizer of the trained model by: `rollout_worker.tokenizer`, else
 * `service.inference_service.tokenizer`, else `data.tokenizer_path`, else the model itself (an
 * engine preset selects the byte tokenizer).
 */
export function tokenizerName(config: RecipeConfig): string {
  return (
    config.rollout_worker.tokenizer ||
    config.service.inference_service.tokenizer ||
    config.data.tokenizer_path ||
    config.service.train_service.model
  );
}

/**
 * Checks that the model a `local` recipe trains is one of the engine's presets (remote services
 * check their own model names when the run connects).
 * @throws {@link RecipeError} naming `service.train_service.model`, the presets and the closest one.
 */
export function checkModelName(recipe: LoadedRecipe): void {
  const train = recipe.config.service.train_service;
  if (train.backend !== "local" || Object.hasOwn(MODEL_PRESETS, train.model)) return;
  const presets = Object.keys(MODEL_PRESETS);
  const suggestion = didYouMean(train.model, presets);
  const hint = suggestion === undefined ? "" : `did you mean "${suggestion}"? `;
  throw RecipeError.fromIssues(
    [
      {
        keyPath: "service.train_service.model",
        message: `"${train.model}" is not a model of the local engine; ${hint}its presets are ${presets.join(", ")}`,
        ...(suggestion !== undefined && { suggestion }),
      },
    ],
    { file: recipe.path },
  );
}

/**
 * The longest sequence the run accepts: `rollout_worker.max_sequence_length`, else the model's
 * context.
 * @param contextLength the model's context, when known.
 * @throws {@link "nexrl/errors".RunError | RunError} when `max_sequence_length` is longer than the context.
 */
export function checkContextLength(config: RecipeConfig, contextLength: number | undefined): number | undefined {
  const maxSequenceLength = config.rollout_worker.max_sequence_length ?? contextLength;
  if (contextLength !== undefined && maxSequenceLength !== undefined && maxSequenceLength > contextLength) {
    throw new RunError(
      `rollout_worker.max_sequence_length (${maxSequenceLength}) is longer than the context of model ${config.service.train_service.model} (${contextLength} tokens); lower it, with max_response_length and max_prompt_length to fit`,
      { code: "setup" },
    );
  }
  return maxSequenceLength;
}

/** The context of a local preset; undefined for remote models, whose service tells it when the run connects. */
function knownContextLength(config: RecipeConfig): number | undefined {
  const train = config.service.train_service;
  return train.backend === "local"
    ? MODEL_PRESETS[train.model as keyof typeof MODEL_PRESETS]?.contextLength
    : undefined;
}

/**
 * Checks, on the local backend, that `rollout_worker.reward_model.sampler_path` (read with
 * `judge_mode: reward_model`) names a weights file the engine can load, or a preset. A remote
 * service's sampler path is opened when the run connects (`openRewardModel`), before any rollout.
 * @param cwd the folder a relative path resolves against: where nexrl runs, as the engine reads it.
 * @throws {@link RecipeError} naming the key, the path and what to set it to.
 */
async function checkRewardModelPath(recipe: LoadedRecipe, cwd: string): Promise<void> {
  const rewardModel = workerSettings(recipe.config).rewardModel;
  if (rewardModel === undefined || recipe.config.service.train_service.backend !== "local") return;
  if (Object.hasOwn(MODEL_PRESETS, rewardModel.samplerPath)) return;
  try {
    await readStateFile(resolve(cwd, rewardModel.samplerPath));
  } catch (cause) {
    throw rewardModelPathError(rewardModel.samplerPath, "local", cause, recipe.path);
  }
}

/** The run state `resume.resume_path` names (beside the recipe first, then from `cwd`). */
export function locateResumeState(recipe: LoadedRecipe, cwd: string): Promise<string> {
  return locateRecipeCheckpoint(recipe, recipe.config.resume.resume_path, cwd);
}

/**
 * Checks that a checkpoint holds the model the recipe trains.
 * @throws {@link "nexrl/errors".RunError | RunError} naming both.
 */
export function checkCheckpointModel(config: RecipeConfig, state: RunState, path: string): void {
  const train = config.service.train_service;
  if (state.model.name !== train.model || state.model.backend !== train.backend) {
    throw new RunError(
      `the checkpoint ${path} holds ${state.model.backend} model ${state.model.name}, but the recipe trains ${train.backend} model ${train.model}`,
      { code: "setup" },
    );
  }
}

/** The data loaders of a run: training, and validation when the recipe validates. */
export interface RunLoaders {
  /** The training data. */
  train: DataLoader;
  /** The validation data, when `validate` runs. */
  validation: DataLoader | undefined;
}

/**
 * Opens the training data and, when the run validates, the validation data. Without a tokenizer
 * (`nexrl validate` before a download) prompts are not measured against `data.max_prompt_length`.
 */
async function openLoaders(config: RecipeConfig, tokenizer: Tokenizer | undefined): Promise<RunLoaders> {
  const open = (data: NonNullable<RecipeConfig["validate"]["data"]>, isVal: boolean): Promise<DataLoader> =>
    openDataLoader(data, tokenizer, isVal);
  const validationData = config.validate.data;
  return {
    train: await open(config.data, false),
    validation:
      validationData && (config.validate.validate_before_train || config.validate.eval.validate_freq > 0)
        ? await open(validationData, true)
        : undefined,
  };
}

/** What a run needs from its recipe, checked and opened before anything is written. */
export interface PreparedRun {
  /** The rollout worker and trainer classes. */
  classes: { worker: RolloutWorkerClass; trainer: TrainerClass };
  /** Their recipe options, checked by their `optionsSchema`s. */
  options: { worker: ClassOptions; trainer: ClassOptions };
  /** The tokenizer of the trained model. */
  tokenizer: Tokenizer;
  /** The data. */
  loaders: RunLoaders;
  /** Warnings about what only the rollouts can show. */
  notes: string[];
}

/**
 * The checks of a recipe's settings that a run and `nexrl validate` both make first: the
 * inference backend, a local model's name, sequences against a preset's context and a local
 * reward model's weights.
 * @param cwd the folder a relative reward-model path resolves against.
 * @returns the worker's notes: what only its rollouts can show.
 */
async function checkSettings(recipe: LoadedRecipe, cwd: string): Promise<string[]> {
  const { config } = recipe;
  checkInferenceBackend(config);
  checkModelName(recipe);
  checkContextLength(config, knownContextLength(config));
  await checkRewardModelPath(recipe, cwd);
  return rolloutWorkerNotes(config);
}

/**
 * Refuses a custom trainer whose advantages are group-relative (a subclass of
 * {@link GrpoTrainer}) with groups of one rollout, where every advantage is 0; the
 * recipe schema refuses `remote_api_grpo` itself the same way.
 * @throws {@link RecipeError} naming `data.rollout_repeat_n`.
 */
function checkTrainerGroups(recipe: LoadedRecipe, trainer: TrainerClass): void {
  const { config } = recipe;
  const repeat = config.data.rollout_repeat_n;
  if (config.trainer.type !== "custom" || repeat >= 2 || !isDerivedFrom(trainer, GrpoTrainer)) return;
  throw RecipeError.fromIssues(
    [
      {
        keyPath: "data.rollout_repeat_n",
        message: `is ${repeat}, and the trainer ${config.trainer.custom_trainer_class_name} (a GrpoTrainer) compares each rollout with the other rollouts of its task: in a group of one, every advantage is 0 and nothing is learned; set it to 2 or more (e.g. 4 or 8)`,
      },
    ],
    { file: recipe.path },
  );
}

/**
 * Checks a recipe and opens what its run needs: the services it names are reachable through this
 * build, a local model is a preset, sequences fit a preset's context, the worker and trainer
 * classes load (the agent gateway starts; `signal` closes it), the agent has a reward source, a
 * local reward model's weights load, the tokenizer loads (downloaded from the Hub if need be) and the data opens.
 * @throws what `runRecipe` documents for a recipe it cannot run.
 */
export async function prepareRun(recipe: LoadedRecipe, signal: AbortSignal): Promise<PreparedRun> {
  const { config } = recipe;
  const notes = await checkSettings(recipe, process.cwd());
  const classes = {
    worker: await resolveRolloutWorkerClass(config, recipe.dir, recipe.path, signal),
    trainer: await resolveTrainerClass(config, recipe.dir, recipe.path),
  };
  checkTrainerGroups(recipe, classes.trainer);
  const options = {
    worker: await rolloutWorkerOptions(config, classes.worker, recipe.path),
    trainer: await trainerOptions(config, classes.trainer, recipe.path),
  };
  const tokenizer = await loadTokenizer(tokenizerName(config), tokenizerOptions(config));
  const loaders = await openLoaders(config, tokenizer);
  appendAll(notes, checkFirstRows(config, loaders, tokenizer));
  return { classes, options, tokenizer, loaders, notes };
}

/**
 * `nexrl validate`: every check {@link prepareRun} makes, the resume checkpoint's, and the same
 * checks of the warm start `init:` names, without starting the agent gateway or downloading a
 * tokenizer.
 * @param recipe the loaded recipe.
 * @param cwd the folder relative paths of the command line resolve against.
 * @param env the environment an `init.from_recipe` recipe is loaded with (`process.env` by default).
 * @returns notes for the user: what a run would download, and what only its rollouts can show.
 * @throws the error the run would fail with at start-up.
 */
export async function checkRecipe(
  recipe: LoadedRecipe,
  cwd: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<string[]> {
  return checkRecipeIn(recipe, cwd, env, []);
}

async function checkRecipeIn(
  recipe: LoadedRecipe,
  cwd: string,
  env: Readonly<Record<string, string | undefined>>,
  chain: readonly string[],
): Promise<string[]> {
  const { config } = recipe;
  const notes = await checkSettings(recipe, cwd);
  await checkRolloutWorkerClass(config, recipe.dir, recipe.path);
  const trainerClass = await resolveTrainerClass(config, recipe.dir, recipe.path);
  checkTrainerGroups(recipe, trainerClass);
  await trainerOptions(config, trainerClass, recipe.path);
  const name = tokenizerName(config);
  const source = await locateTokenizer(name);
  let tokenizer: Tokenizer | undefined;
  if (source.kind === "hub" && !source.cache.cached) {
    const { endpoint, revision, folder } = source.cache;
    notes.push(
      `the run will download the tokenizer of ${name} (${REQUIRED_TOKENIZER_FILES.join(", ")} and any chat template) from ${endpoint}/${name} (revision ${revision}) into ${folder}; prompt lengths are checked then`,
    );
  } else {
    tokenizer = await loadTokenizer(name, tokenizerOptions(config));
  }
  appendAll(notes, checkFirstRows(config, await openLoaders(config, tokenizer), tokenizer));
  if (config.resume.mode === "from_path") {
    const path = await locateResumeState(recipe, cwd);
    checkCheckpointModel(config, await readRunState(path), path);
  }
  const distributed = config.rollout_worker.distributed;
  if (distributed)
    notes.push(
      `rollouts run on nexrl worker processes (nexrl worker -c ${relative(cwd, recipe.path) || recipe.path}): the run connects to the Redis server ${serverName(distributed.url)} (stream prefix ${distributed.stream_prefix}) when it starts, and waits for workers`,
    );
  const rewardModel = workerSettings(config).rewardModel;
  if (rewardModel !== undefined && config.service.train_service.backend !== "local")
    notes.push(
      `the reward model's sampler ${rewardModel.samplerPath} (rollout_worker.reward_model.sampler_path) is opened on ${config.service.train_service.backend} when the run connects, before any rollout`,
    );
  if (config.service.train_service.backend !== "local")
    notes.push(
      `the context of ${config.service.train_service.model} is checked against rollout_worker.max_sequence_length when the run connects to ${config.service.train_service.backend}`,
    );
  return notes.concat(await checkInit(recipe, cwd, env, [...chain, recipe.path]));
}

/**
 * The warm start of `init:`: a checkpoint that holds the recipe's model, or a recipe that trains
 * the same model and passes the same checks (its notes prefixed with its name).
 */
async function checkInit(
  recipe: LoadedRecipe,
  cwd: string,
  env: Readonly<Record<string, string | undefined>>,
  chain: readonly string[],
): Promise<string[]> {
  const init = recipe.config.init;
  if (init === undefined || init === null) return [];
  if (init.from_checkpoint !== undefined) {
    const path = await locateRecipeCheckpoint(recipe, init.from_checkpoint, cwd);
    checkCheckpointModel(recipe.config, await readRunState(path), path);
    return [];
  }
  const file = init.from_recipe!;
  refuseInitCycle(chain, file, cwd);
  const child = await loadRecipe(file, { env, cwd });
  const [outer, inner] = [recipe.config.service.train_service, child.config.service.train_service];
  if (outer.backend !== inner.backend || outer.model !== inner.model)
    throw new RunError(
      `init.from_recipe ${relative(cwd, file) || file} trains ${inner.backend} model ${inner.model}, but the recipe trains ${outer.backend} model ${outer.model}; warm-start the same model`,
      { code: "setup" },
    );
  const notes = await checkRecipeIn(child, cwd, env, chain);
  return notes.map((note) => `init.from_recipe ${relative(cwd, file) || file}: ${note}`);
}
