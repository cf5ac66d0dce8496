/**
 * Token and cost accounting: every token a run's training service samples, scores or trains on
 * is counted where it crosses the service interface, so rollouts, validation, agents calling
 * through the gateway, reference and teacher logprobs and training passes all count alike.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import type { ModelInput } from "../wire/wire.js";
import { forwardBackwardCustom } from "../backends/custom-loss.js";
import type {
  ApiFuture,
  ForwardBackwardOutput,
  SampleOutput,
  SamplingClient,
  TrainingClient,
  TrainingService,
} from "../contracts/training.js";

/** Tokens a training service processed, by kind. */
export interface TokenCounts {
  /**
   * Prompt tokens the sampler read: the prompt of each sampling request (once per request,
   * whatever its number of samples) and the tokens of each `computeLogprobs` call.
   */
  prompt: number;
  /** Tokens the sampler generated. */
  completion: number;
  /** Tokens the trainer ran through the model: the inputs of every `forwardBackward` and `forward` datum. */
  trained: number;
}

/** `accounting.prices` of a recipe: currency units per million tokens. */
export type TokenPrices = NonNullable<RecipeConfig["accounting"]["prices"]>;

const zero = (): TokenCounts => ({ prompt: 0, completion: 0, trained: 0 });

/** Positions of a model input; an image chunk counts its `expected_tokens` when it states them. */
function inputLength(input: ModelInput): number {
  let n = 0;
  for (const chunk of input.chunks)
    n += chunk.type === "encoded_text" ? chunk.tokens.length : (chunk.expected_tokens ?? 0);
  return n;
}

/**
 * Counts tokens as they cross a {@link TrainingService}: {@link TokenMeter.wrap} returns the
 * service with every training and sampling client it creates counted; {@link TokenMeter.take}
 * returns what was counted since the last take. A request counts once its result arrived.
 */
export class TokenMeter {
  private counts = zero();

  /** The counts since the last call, and starts counting afresh. */
  take(): TokenCounts {
    const counts = this.counts;
    this.counts = zero();
    return counts;
  }

  /** `service`, with the clients it creates counted by this meter. */
  wrap(service: TrainingService): TrainingService {
    return {
      get backend() {
        return service.backend;
      },
      connect: () => service.connect(),
      close: () => service.close(),
      createTrainingClient: async (options) => this.training(await service.createTrainingClient(options)),
      createSamplingClient: async (path) => this.sampling(await service.createSamplingClient(path)),
    };
  }

  private add(kind: keyof TokenCounts, n: number): void {
    this.counts[kind] += n;
  }

  /** `future`, adding what `count` says of its result the first time it is read. */
  private counted<T>(future: ApiFuture<T>, count: (result: T) => void): ApiFuture<T> {
    let result: Promise<T> | undefined;
    return {
      result: () =>
        (result ??= future.result().then((value) => {
          count(value);
          return value;
        })),
    };
  }

  private training(client: TrainingClient): TrainingClient {
    const counted = async (
      data: Parameters<TrainingClient["forward"]>[0],
      submitted: Promise<ApiFuture<ForwardBackwardOutput>>,
    ): Promise<ApiFuture<ForwardBackwardOutput>> => {
      const tokens = data.reduce((n, d) => n + inputLength(d.model_input), 0);
      return this.counted(await submitted, () => this.add("trained", tokens));
    };
    const wrapped: TrainingClient = {
      get modelId() {
        return client.modelId;
      },
      forward: (data, lossFn, lossFnConfig) => counted(data, client.forward(data, lossFn, lossFnConfig)),
      forwardBackward: (data, lossFn, lossFnConfig) =>
        counted(data, client.forwardBackward(data, lossFn, lossFnConfig)),
      // Through the counted passes, so that both of its passes count as the built-in ones do.
      forwardBackwardCustom: (data, lossFn) => forwardBackwardCustom(wrapped, data, lossFn),
      optimStep: (params) => client.optimStep(params),
      saveState: (name, options) => client.saveState(name, options),
      loadState: (path, options) => client.loadState(path, options),
      saveWeightsForSampler: (name, options) => client.saveWeightsForSampler(name, options),
      getInfo: () => client.getInfo(),
    };
    return wrapped;
  }

  private sampling(client: SamplingClient): SamplingClient {
    return {
      get modelPath() {
        return client.modelPath;
      },
      sample: async (prompt, numSamples, params) =>
        this.counted<SampleOutput>(await client.sample(prompt, numSamples, params), (output) => {
          this.add("prompt", inputLength(prompt));
          this.add(
            "completion",
            output.sequences.reduce((n, s) => n + s.tokens.length, 0),
          );
        }),
      computeLogprobs: async (tokens) => {
        const logprobs = await client.computeLogprobs(tokens);
        this.add("prompt", tokens.length);
        return logprobs;
      },
    };
  }
}

/**
 * The `tokens/*` and `cost/*` metrics of a run: each row gets the tokens counted since the
 * previous row (`tokens/prompt`, `tokens/completion`, `tokens/trained`), the run's totals so far
 * (`tokens/*_total`), and with `accounting.prices` the estimated cost of the row and of the run
 * (`cost/step`, `cost/total`, in the prices' currency).
 */
export class RunAccounting {
  private totals = zero();
  private costTotal = 0;

  /**
   * @param meter counts the run's tokens.
   * @param prices per million tokens, if the recipe gives them.
   */
  constructor(
    readonly meter: TokenMeter,
    private readonly prices: TokenPrices | undefined,
  ) {}

  /** Continues the totals of `row`, the last row a resumed run keeps. */
  restore(row: Readonly<Record<string, unknown>> | undefined): void {
    const number = (key: string): number => (typeof row?.[key] === "number" ? (row[key] as number) : 0);
    this.totals = {
      prompt: number("tokens/prompt_total"),
      completion: number("tokens/completion_total"),
      trained: number("tokens/trained_total"),
    };
    this.costTotal = number("cost/total");
  }

  /** The metrics of the next row: the tokens since the last row, the totals, and the costs when priced. */
  row(): Record<string, number> {
    const counts = this.meter.take();
    for (const kind of ["prompt", "completion", "trained"] as const) this.totals[kind] += counts[kind];
    const metrics: Record<string, number> = {
      "tokens/prompt": counts.prompt,
      "tokens/completion": counts.completion,
      "tokens/trained": counts.trained,
      "tokens/prompt_total": this.totals.prompt,
      "tokens/completion_total": this.totals.completion,
      "tokens/trained_total": this.totals.trained,
    };
    if (this.prices) {
      const cost = tokenCost(counts, this.prices);
      this.costTotal += cost;
      metrics["cost/step"] = cost;
      metrics["cost/total"] = this.costTotal;
    }
    return metrics;
  }
}

/** The cost of `counts` at `prices` (per million tokens). */
export function tokenCost(counts: TokenCounts, prices: TokenPrices): number {
  return (counts.prompt * prices.prompt + counts.completion * prices.completion + counts.trained * prices.train) / 1e6;
}
