/**
 * {@link BaseTrainer}: the training step against any training service.
 * @module
 */
import { NEXRL_BRAND } from "../brand.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { adamParams, datum, type AdamParams, type Datum } from "../wire/wire.js";
import { lossKind, trajectoryToDatum } from "./datums.js";
import { rolloutMetrics } from "./rollout-metrics.js";
import { InputError } from "../errors.js";
import type { ClassOptions, OptionsSchema } from "../contracts/options.js";
import type { AlgorithmConfig, Trainer, TrainerContext, TrainStepResult } from "../contracts/trainer.js";
import type { ApiFuture, TrainingClient } from "../contracts/training.js";
import type { ForwardBackwardOutput } from "../wire/results.js";

/**
 * The trainer of every built-in algorithm. One step: rollout metrics, missing sampler logprobs
 * filled by a forward pass when the loss needs them, {@link BaseTrainer.prepareTrajectories}
 * (the algorithm: advantages, filtering), one datum per trajectory (token in, token out,
 * shifted by one), then `forwardBackward` and `optimStep` submitted back to back and awaited
 * together. Datums with no signal (all advantages or weights 0) are left out; with none left the
 * step is skipped (`train/skipped` = 1).
 *
 * Subclass it and override `prepareTrajectories` to write an algorithm:
 *
 * @example
 * ```ts
 * import { BaseTrainer, type Trajectory } from "nexrl";
 *
 * export class MyAlgorithmTrainer extends BaseTrainer {
 *   protected prepareTrajectories(trajectories: Trajectory[], metrics: Record<string, number>) {
 *     for (const t of trajectories) t.advantage = t.reward;
 *     metrics["my/mean_advantage"] = trajectories.reduce((a, t) => a + t.reward, 0) / trajectories.length;
 *     return trajectories;
 *   }
 * }
 * ```
 */
export abstract class BaseTrainer<Options extends object = ClassOptions> implements Trainer {
  /** Brand recognised by `loadUserClass` across copies of nexrl. */
  static readonly [NEXRL_BRAND]: string = "nexrl.RemoteApiTrainer";
  /**
   * Checks the recipe's `trainer.options` of a custom subclass before the run starts; its output
   * becomes {@link BaseTrainer.options}. Leave it unset to take the options as written.
   */
  static optionsSchema?: OptionsSchema;
  /** Services, settings and tokenizer. */
  protected readonly context: TrainerContext;
  /** The recipe's `trainer.options` (after `optionsSchema`, when the class has one); `{}` when it gives none. */
  readonly options: Readonly<Options>;
  /** Seconds the service keeps each sampler snapshot (default one day). */
  protected readonly samplerTtlSeconds: number = 24 * 3600;
  private readonly warned = new Set<string>();

  /** @param context services, settings and tokenizer, given by the pipeline. */
  constructor(context: TrainerContext) {
    this.context = context;
    this.options = (context.options ?? {}) as Readonly<Options>;
  }

  /** The hyper-parameters (`trainer.algorithm` merged with `service.train_service.config`). */
  get algorithm(): AlgorithmConfig {
    return this.context.settings.algorithm;
  }

  /**
   * The algorithm: returns the trajectories to train on, with what the loss needs — an
   * `advantage` (or per-token `advantages`) for policy losses. Add metrics to `metrics`; every key
   * ends up in `metrics.jsonl`.
   */
  protected abstract prepareTrajectories(
    trajectories: Trajectory[],
    metrics: Record<string, number>,
  ): Trajectory[] | Promise<Trajectory[]>;

  /** Whether trajectories need sampler logprobs (true for policy losses). */
  protected needsSamplerLogprobs(): boolean {
    return lossKind(this.algorithm.lossFn) === "policy";
  }

  /** How supervised losses weight a datum's tokens: `sum` (default) or `mean` per datum. */
  protected supervisedReduction(): "sum" | "mean" {
    return "sum";
  }

  /**
   * One training step on `trajectories`; adds `rollout/*`, `train/*` and `optim/*` metrics (and
   * those of `prepareTrajectories`) to `metrics`.
   * @throws {@link "nexrl/errors".InputError | InputError} when prepared trajectories are invalid or miss a loss input.
   */
  async train(trajectories: Trajectory[], metrics: Record<string, number>): Promise<TrainStepResult> {
    Object.assign(metrics, rolloutMetrics(trajectories));
    if (this.needsSamplerLogprobs()) await this.fillMissingLogprobs(trajectories);
    const prepared = await this.prepareTrajectories(trajectories, metrics);
    if (!Array.isArray(prepared))
      throw new InputError(`${this.constructor.name}.prepareTrajectories must return an array of trajectories`);
    const lossFn = this.algorithm.lossFn;
    const backend = this.context.service.backend;
    const built: Array<{ datum: Datum; mask: number[]; trajectory: Trajectory }> = [];
    for (const t of prepared) {
      t.validate();
      const d = trajectoryToDatum(t, { lossFn, backend, reduction: this.supervisedReduction() });
      if (d) built.push({ datum: d, mask: t.lossMask.slice(1), trajectory: t });
    }
    const trainedTokens = built.reduce((n, b) => n + b.mask.reduce((a, m) => a + m, 0), 0);
    this.putStepSize(metrics, built.length, trainedTokens);
    metrics["train/datums_without_signal"] = prepared.length - built.length;
    if (built.length === 0)
      return {
        trajectories: prepared,
        datums: 0,
        stepped: false,
        skipReason: this.describeSkippedStep(trajectories, prepared, metrics),
      };
    const datums = built.map((b) => b.datum);
    const lossFnConfig = this.lossFnConfig();
    // Every training client checks its datums against the loss contract (validateLossInputs)
    // before sending: no second check here.
    const fb = await this.forwardBackwardAndStep(metrics, (client) =>
      client.forwardBackward(datums, lossFn, lossFnConfig),
    );
    this.putLossMetrics(
      metrics,
      built,
      fb.lossFnOutputs.map((o) => o.logprobs),
      fb.metrics["loss:sum"] ?? NaN,
    );
    for (const [key, value] of Object.entries(fb.metrics)) if (key !== "loss:sum") metrics[`train/${key}`] = value;
    return { trajectories: prepared, datums: datums.length, stepped: true };
  }

  /**
   * Records the size of a step: `train/num_datums`, `train/num_tokens` (the tokens the loss
   * trains) and `train/skipped` (1 when there is no datum to train on).
   */
  protected putStepSize(metrics: Record<string, number>, datums: number, tokens: number): void {
    metrics["train/num_datums"] = datums;
    metrics["train/num_tokens"] = tokens;
    metrics["train/skipped"] = datums === 0 ? 1 : 0;
  }

  /**
   * Submits a step's loss pass (`submitLossPass`: `forwardBackward` or `forwardBackwardCustom`)
   * and `optimStep` back to back, awaits both together, adds the `optim/*` metrics and returns
   * the loss pass's output.
   */
  protected async forwardBackwardAndStep(
    metrics: Record<string, number>,
    submitLossPass: (client: TrainingClient) => Promise<ApiFuture<ForwardBackwardOutput>>,
  ): Promise<ForwardBackwardOutput> {
    const client = this.context.trainingClient;
    const forwardBackward = await submitLossPass(client);
    const optimStep = await client.optimStep(this.optimizerParams());
    const [fb, optim] = await Promise.all([forwardBackward.result(), optimStep.result()]);
    for (const [key, value] of Object.entries(optim.metrics)) metrics[`optim/${key}`] = value;
    return fb;
  }

  /** The Adam settings of every `optimStep`, from the recipe's algorithm. */
  protected optimizerParams(): AdamParams {
    const { learningRate, beta1, beta2, eps, weightDecay, gradClipNorm } = this.algorithm;
    return adamParams({ learningRate, beta1, beta2, eps, weightDecay, gradClipNorm });
  }

  /**
   * Why a step trained nothing, for the progress line and the step's event: no trajectories,
   * none kept by {@link BaseTrainer.prepareTrajectories}, or none with a training signal.
   * Override it to say what an algorithm's own filters dropped.
   * @param trajectories the step's trajectories.
   * @param prepared what `prepareTrajectories` returned.
   * @param _metrics the step's metrics so far (for overrides: GRPO reads its group counts).
   */
  protected describeSkippedStep(
    trajectories: readonly Trajectory[],
    prepared: readonly Trajectory[],
    _metrics: Readonly<Record<string, number>>,
  ): string {
    if (trajectories.length === 0) return "the step had no trajectories";
    if (prepared.length === 0)
      return `${this.constructor.name}.prepareTrajectories kept none of the ${trajectories.length} trajectories: nothing to learn from`;
    return `none of the ${prepared.length} trajectories carries a training signal (every advantage or loss weight is 0, or no token is trained): nothing to learn from`;
  }

  /** Exports the current weights for sampling under `name` (kept `samplerTtlSeconds`) and returns the path. */
  async saveSamplerWeights(name: string): Promise<string> {
    const future = await this.context.trainingClient.saveWeightsForSampler(name, {
      ttlSeconds: this.samplerTtlSeconds,
    });
    return (await future.result()).path;
  }

  /** Reports `message` once per `key` for the lifetime of the trainer. */
  protected warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.context.warn(message);
  }

  /**
   * Computes `logprobs` for trajectories that lack them with a forward pass on the current
   * weights (which, in sync mode, are the weights that sampled them), and warns once.
   */
  protected async fillMissingLogprobs(trajectories: readonly Trajectory[]): Promise<void> {
    const missing = trajectories.filter((t) => t.logprobs === undefined && t.tokens.length > 1);
    if (missing.length === 0) return;
    this.warnOnce(
      "logprobs",
      `${missing.length} trajectories have no sampler logprobs, which ${this.algorithm.lossFn} needs; nexrl computes them with a forward pass on the trainer's weights. ` +
        "Set logprobs in the rollout worker (completionTrajectory does) to save that pass and train on the exact sampling distribution.",
    );
    const datums = missing.map((t) =>
      datum(t.tokens.slice(0, -1), { target_tokens: t.tokens.slice(1), weights: t.tokens.slice(1).map(() => 0) }),
    );
    const output = await (await this.context.trainingClient.forward(datums, "cross_entropy")).result();
    missing.forEach((t, i) => {
      t.logprobs = [0, ...output.lossFnOutputs[i]!.logprobs];
    });
  }

  private lossFnConfig(): Record<string, number> {
    const config = { ...this.algorithm.lossFnConfig };
    const entropy = this.algorithm.entropyCoeff;
    if (entropy !== 0) {
      if (this.context.service.backend === "weaver") config.entropy_coeff = entropy;
      else
        this.warnOnce(
          "entropy",
          `entropy_coeff ${entropy} is ignored: the ${this.context.service.backend} backend has no entropy bonus`,
        );
    }
    return config;
  }

  private putLossMetrics(
    metrics: Record<string, number>,
    built: ReadonlyArray<{ mask: number[]; trajectory: Trajectory }>,
    logprobs: readonly number[][],
    lossSum: number,
  ): void {
    let tokens = 0;
    let nll = 0;
    let kl = 0;
    const policy = lossKind(this.algorithm.lossFn) === "policy";
    built.forEach(({ mask, trajectory }, i) => {
      // The datum's sampler logprob at position j is the trajectory's at j + 1.
      const sampler = policy ? trajectory.logprobs : undefined;
      mask.forEach((m, j) => {
        if (m === 0) return;
        const lp = logprobs[i]?.[j] ?? 0;
        tokens++;
        nll -= lp;
        if (sampler) kl += sampler[j + 1]! - lp;
      });
    });
    metrics["train/loss_sum"] = lossSum;
    metrics["train/loss"] = policy ? lossSum / Math.max(tokens, 1) : nll / Math.max(tokens, 1);
    metrics["train/nll"] = nll / Math.max(tokens, 1);
    if (policy) metrics["train/kl_sample_train"] = kl / Math.max(tokens, 1);
  }
}
