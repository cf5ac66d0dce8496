/**
 * `forwardBackwardCustom`: the parameter gradient of a loss written in TypeScript equals the
 * engine's exact gradient of the same loss, for a per-token loss (against the built-in loss) and
 * for the pairwise DPO loss of `remote_api_dpo` (against per-sequence engine gradients combined by the chain
 * rule, and finite differences); then the same through every training client, local and over
 * HTTP (`nexrl serve` speaking the Tinker and Weaver protocols).
 */
import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { Rng } from "../../src/engine/prng.js";
import { TrainingCore } from "../../src/engine/training.js";
import { forwardBackwardCustom, type LossPassClient } from "../../src/backends/custom-loss.js";
import type { CustomLossFn } from "../../src/contracts/training.js";
import { createTrainingService } from "../../src/backends/index.js";
import { pairwiseLogisticLoss } from "../../src/algorithms/pairwise-loss.js";
import type { TrainingBackend, TrainingClient } from "../../src/contracts/training.js";
import { InputError } from "../../src/errors.js";
import { adamParams, datum, type Datum } from "../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, service, tokens } from "../support/training.js";

const config = resolveModelConfig({ dModel: 8, nLayers: 2, nHeads: 2, contextLength: 12 }, 259);

/** A tiny model with weights scrambled away from their initialisation, so every path matters. */
function scrambledCore(): TrainingCore {
  const core = new TrainingCore(config, 3);
  const rng = new Rng(11);
  const w = core.weights.flat;
  for (let i = 0; i < w.length; i++) w[i] = rng.normal() * 0.4;
  return core;
}

/** The two loss passes over a core, as a training client runs them. */
function coreClient(core: TrainingCore): LossPassClient {
  return {
    forward: async (data, loss, cfg) => ({ result: async () => core.run(data, loss, cfg, false) }),
    forwardBackward: async (data, loss, cfg) => ({ result: async () => core.run(data, loss, cfg, true) }),
  };
}

/** Runs `pass` on zeroed gradients and returns a copy of the gradients it accumulated. */
async function gradientOf(core: TrainingCore, pass: () => Promise<unknown>): Promise<Float32Array> {
  core.grads.flat.fill(0);
  await pass();
  return core.grads.flat.slice();
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const maxAbs = (a: ArrayLike<number>): number => maxAbsDiff(a, new Float32Array(a.length));

const SEQUENCES = [
  [256, 10, 200, 33, 7, 7, 90, 12, 5],
  [256, 44, 3, 250],
  [1, 2, 257, 100, 100, 60],
  [256, 70, 71, 72, 73, 74, 75],
];

/** RL datums (sampler logprobs a little off the model's, mixed-sign advantages). */
function rlDatums(core: TrainingCore): Datum[] {
  const probe = SEQUENCES.map((s) => datum(s.slice(0, -1), { target_tokens: s.slice(1), weights: s.slice(1) }));
  const lp = core.run(probe, "cross_entropy", undefined, false).lossFnOutputs.map((o) => o.logprobs);
  const offsets = [-0.5, -0.05, 0.05, 0.5];
  const advantages = [1, -1, 0.5, -2, 1.5];
  return SEQUENCES.map((s, i) =>
    datum(s.slice(0, -1), {
      target_tokens: s.slice(1),
      logprobs: lp[i]!.map((l, t) => l + offsets[(t + i) % 4]!),
      advantages: lp[i]!.map((_, t) => advantages[(t + 2 * i) % 5]!),
    }),
  );
}

/** DRO written by hand: L = −Σ [lp·A − ½β(lp − q)²], ∂L/∂lp = −A + β(lp − q). */
function droLoss(beta: number): CustomLossFn {
  return (data, logprobs) => {
    let loss = 0;
    const gradLogprobs = logprobs.map((lp, i) => {
      const q = data[i]!.loss_fn_inputs.logprobs!.data;
      const a = data[i]!.loss_fn_inputs.advantages!.data;
      return lp.map((l, t) => {
        const d = l - q[t]!;
        loss += -(l * a[t]! - 0.5 * beta * d * d);
        return -a[t]! + beta * d;
      });
    });
    return { loss, gradLogprobs, metrics: { "custom/tokens:sum": logprobs.flat().length } };
  };
}

/** Importance sampling written by hand: L = −Σ exp(lp − q)·A. */
const isLoss: CustomLossFn = (data, logprobs) => {
  let loss = 0;
  const gradLogprobs = logprobs.map((lp, i) => {
    const q = data[i]!.loss_fn_inputs.logprobs!.data;
    const a = data[i]!.loss_fn_inputs.advantages!.data;
    return lp.map((l, t) => {
      const r = Math.exp(l - q[t]!);
      loss -= r * a[t]!;
      return -r * a[t]!;
    });
  });
  return { loss, gradLogprobs };
};

/** Σ_t w_t·x_t. */
const dot = (w: ArrayLike<number>, x: ArrayLike<number>): number => {
  let s = 0;
  for (let t = 0; t < w.length; t++) s += w[t]! * x[t]!;
  return s;
};

/**
 * The DPO loss the `remote_api_dpo` trainer sends, over datums [chosen₀, rejected₀, chosen₁, …]:
 * each datum's `weights` mark its response and `ref_logprobs` holds the reference model's
 * logprobs. loss = (1/K) Σ_k −log σ(m_k), m_k = β[(S_c − R_c) − (S_r − R_r)] with S = Σ w·lp and
 * R = Σ w·ref, over K pairs.
 */
const dpoLoss = (beta: number): CustomLossFn => pairwiseLogisticLoss({ beta, metricPrefix: "dpo" });

/** Two preference pairs over the sequences, responses after the first two tokens, reference logprobs off the model's. */
function pairDatums(core: TrainingCore): Datum[] {
  const pairs = [
    [SEQUENCES[0]!, SEQUENCES[2]!],
    [SEQUENCES[3]!, SEQUENCES[1]!],
  ];
  const probe = pairs.flat().map((s) => datum(s.slice(0, -1), { target_tokens: s.slice(1), weights: s.slice(1) }));
  const lp = core.run(probe, "cross_entropy", undefined, false).lossFnOutputs.map((o) => o.logprobs);
  return pairs.flat().map((s, i) =>
    datum(s.slice(0, -1), {
      target_tokens: s.slice(1),
      weights: s.slice(1).map((_, t) => (t >= 1 ? 1 : 0)),
      ref_logprobs: lp[i]!.map((l, t) => l + 0.3 * Math.sin(3 * i + t)),
    }),
  );
}

describe("forwardBackwardCustom on the engine: the parameter gradient is the loss's exact gradient", () => {
  it.each([
    ["dro", droLoss(0.5), { beta: 0.5 }],
    ["importance_sampling", isLoss, undefined],
  ] as const)("per-token loss: a hand-written %s equals the built-in within 1e-4", async (name, loss, cfg) => {
    const core = scrambledCore();
    const data = rlDatums(core);
    const client = coreClient(core);
    let output: Awaited<ReturnType<Awaited<ReturnType<typeof forwardBackwardCustom>>["result"]>> | undefined;
    const custom = await gradientOf(core, async () => {
      output = await (await forwardBackwardCustom(client, data, loss)).result();
    });
    const builtin = await gradientOf(core, async () => core.run(data, name, cfg, true));
    expect(maxAbs(builtin)).toBeGreaterThan(0.05); // the comparison is not between two near-zero vectors
    expect(maxAbsDiff(custom, builtin)).toBeLessThan(1e-4);
    // The reported loss is the custom loss, equal to the built-in's at the same weights.
    const reference = core.run(data, name, cfg, false);
    expect(output!.metrics["loss:sum"]).toBeCloseTo(reference.metrics["loss:sum"]!, 4);
    output!.lossFnOutputs.forEach((o, i) => expect(o.logprobs).toEqual(reference.lossFnOutputs[i]!.logprobs));
  });

  it("pairwise DPO loss (remote_api_dpo's): equals (1/K) Σ_k βσ(−m_k)(G_chosen − G_rejected) of per-sequence engine gradients within 1e-4", async () => {
    const core = scrambledCore();
    const data = pairDatums(core);
    const beta = 0.7;
    const custom = await gradientOf(core, async () =>
      (await forwardBackwardCustom(coreClient(core), data, dpoLoss(beta))).result(),
    );

    // The same gradient by the chain rule, from each sequence's own engine gradient.
    const masked = data.map((d) => ({
      model_input: d.model_input,
      loss_fn_inputs: { target_tokens: d.loss_fn_inputs.target_tokens!, weights: d.loss_fn_inputs.weights! },
    }));
    const lp = core.run(masked, "cross_entropy", undefined, false).lossFnOutputs.map((o) => o.logprobs);
    const expected = new Float64Array(custom.length);
    for (let k = 0; k < data.length; k += 2) {
      const s = (i: number): number =>
        dot(data[i]!.loss_fn_inputs.weights!.data, lp[i]!) -
        dot(data[i]!.loss_fn_inputs.weights!.data, data[i]!.loss_fn_inputs.ref_logprobs!.data);
      const margin = beta * (s(k) - s(k + 1));
      const coef = beta / (1 + Math.exp(margin)) / (data.length / 2); // βσ(−m)/K
      // G_i, the gradient of −Σ w·lp_i, is minus the gradient of the response's logprob.
      const chosen = await gradientOf(core, async () => core.run([masked[k]!], "cross_entropy", undefined, true));
      const rejected = await gradientOf(core, async () => core.run([masked[k + 1]!], "cross_entropy", undefined, true));
      for (let j = 0; j < expected.length; j++) expected[j]! += coef * (chosen[j]! - rejected[j]!);
    }
    expect(maxAbs(expected)).toBeGreaterThan(0.01);
    expect(maxAbsDiff(custom, expected)).toBeLessThan(1e-4);

    // And against central finite differences of the DPO loss along random directions.
    const lossAt = async (): Promise<number> => {
      const lps = core.run(masked, "cross_entropy", undefined, false).lossFnOutputs.map((o) => o.logprobs);
      return (await dpoLoss(beta)(data, lps)).loss;
    };
    const w = core.weights.flat;
    const rng = new Rng(5);
    for (let probe = 0; probe < 3; probe++) {
      const u = Float64Array.from({ length: w.length }, () => rng.normal());
      const norm = Math.hypot(...u);
      const analytic = custom.reduce((acc, g, i) => acc + (g * u[i]!) / norm, 0);
      const saved = w.slice();
      const eps = 1e-2;
      w.forEach((x, i) => (w[i] = x + (eps * u[i]!) / norm));
      const plus = await lossAt();
      w.forEach((_, i) => (w[i] = saved[i]! - (eps * u[i]!) / norm));
      const minus = await lossAt();
      w.set(saved);
      const numeric = (plus - minus) / (2 * eps);
      expect(Math.abs(numeric - analytic), `analytic ${analytic}, numeric ${numeric}`).toBeLessThan(
        1e-2 * Math.abs(analytic) + 1e-4,
      );
    }
  });

  it("sends only target_tokens and the surrogate weights, and refuses bad datums and bad answers before the gradient pass", async () => {
    const core = scrambledCore();
    const sent: Array<[string, Datum[]]> = [];
    const client: LossPassClient = {
      forward: async (d, l, c) => (sent.push(["forward", d]), coreClient(core).forward(d, l, c)),
      forwardBackward: async (d, l, c) => (
        sent.push(["forward_backward", d]),
        coreClient(core).forwardBackward(d, l, c)
      ),
    };
    const data = pairDatums(core);
    await (await forwardBackwardCustom(client, data, dpoLoss(0.5))).result();
    expect(sent.map(([kind]) => kind)).toEqual(["forward", "forward_backward"]);
    for (const [kind, datums] of sent) {
      expect(datums.map((d) => Object.keys(d.loss_fn_inputs).sort())).toEqual(
        data.map(() => ["target_tokens", "weights"]),
      );
      if (kind === "forward")
        expect(datums.flatMap((d) => d.loss_fn_inputs.weights!.data).every((x) => x === 0)).toBe(true);
    }

    sent.length = 0;
    const noTargets = [datum([1, 2], { weights: [1, 1] })];
    await expect(forwardBackwardCustom(client, noTargets, dpoLoss(0.5))).rejects.toThrow(
      /datum 0 has no loss input "target_tokens"/,
    );
    await expect(forwardBackwardCustom(client, [], dpoLoss(0.5))).rejects.toThrow(InputError);
    const short: CustomLossFn = (_d, lp) => ({ loss: 1, gradLogprobs: lp.map((x) => x.slice(1)) });
    await expect(forwardBackwardCustom(client, data, short)).rejects.toThrow(
      /gradLogprobs\[0\] of length 7; datum 0 has 8 logprobs/,
    );
    const nan: CustomLossFn = (_d, lp) => ({ loss: Number.NaN, gradLogprobs: lp });
    await expect(forwardBackwardCustom(client, data, nan)).rejects.toThrow(/returned loss NaN/);
    const missing: CustomLossFn = (_d, lp) => ({ loss: 0, gradLogprobs: lp.slice(1) });
    await expect(forwardBackwardCustom(client, data, missing)).rejects.toThrow(
      /for 3 datums; it must return one array per datum \(4\)/,
    );
    expect(sent.map(([kind]) => kind)).toEqual(["forward", "forward", "forward"]);
  });
});

/** Datums for the service tests: two RL sequences with fixed sampler logprobs and advantages. */
function serviceRlDatums(): Datum[] {
  return ["igpay atinlay", "ellohay orldway"].map((text, i) => {
    const t = tokens(text);
    return datum(t.slice(0, -1), {
      target_tokens: t.slice(1),
      logprobs: t.slice(1).map((_, j) => -5.5 + 0.1 * ((i + j) % 3)),
      advantages: t.slice(1).map((_, j) => (j % 2 === i ? 1 : -0.5)),
    });
  });
}

function servicePairs(): Datum[] {
  return [
    ["Q: 2+2? A: 4", "Q: 2+2? A: 5"],
    ["Q: 3+3? A: 6", "Q: 3+3? A: 9"],
  ].flatMap((pair) =>
    pair.map((text) => {
      const t = tokens(text);
      return datum(t.slice(0, -1), {
        target_tokens: t.slice(1),
        weights: t.slice(1).map((_, j) => (j >= 9 ? 1 : 0)),
        ref_logprobs: t.slice(1).map(() => -5.5),
      });
    }),
  );
}

// Adam with eps = 1 moves each weight by about lr·g for small g: a smooth function of the
// gradient, so equal gradients give equal weights and different ones do not.
const SMOOTH_ADAM = adamParams({ learningRate: 0.05, eps: 1 });

async function logprobsOf(client: TrainingClient, data: Datum[]): Promise<number[]> {
  const masked = data.map((d) => ({
    model_input: d.model_input,
    loss_fn_inputs: {
      target_tokens: d.loss_fn_inputs.target_tokens!,
      weights: { data: d.loss_fn_inputs.target_tokens!.data.map(() => 0), dtype: "float32" as const },
    },
  }));
  return (await (await client.forward(masked, "cross_entropy")).result()).lossFnOutputs.flatMap((o) => o.logprobs);
}

describe.each<TrainingBackend>(["local", "tinker", "weaver"])(
  "forwardBackwardCustom on the %s training client",
  (backend) => {
    it("trains exactly as the built-in loss it re-implements", async () => {
      const svc = await service(backend);
      const custom = await svc.createTrainingClient({ baseModel: "tiny", seed: 7 });
      const builtin = await svc.createTrainingClient({ baseModel: "tiny", seed: 7 });
      const data = serviceRlDatums();
      const before = await logprobsOf(custom, data);

      const out = await (await custom.forwardBackwardCustom(data, isLoss)).result();
      const ref = await (await builtin.forwardBackward(data, "importance_sampling")).result();
      expect(out.metrics["loss:sum"]).toBeCloseTo(ref.metrics["loss:sum"]!, 4);
      expect(out.lossFnOutputs.flatMap((o) => o.logprobs)).toEqual(before);
      await (await custom.optimStep(SMOOTH_ADAM)).result();
      await (await builtin.optimStep(SMOOTH_ADAM)).result();

      const [afterCustom, afterBuiltin] = [await logprobsOf(custom, data), await logprobsOf(builtin, data)];
      expect(maxAbsDiff(afterBuiltin, before)).toBeGreaterThan(1e-2); // the step moved the model
      expect(maxAbsDiff(afterCustom, afterBuiltin)).toBeLessThan(1e-4);
    });

    it("trains a pairwise DPO loss as the local engine does, and lowers it", async () => {
      // A Tinker model (and Weaver's default) of nexrl serve is LoRA of rank 32; so is the reference.
      const reference = await (
        await service("local")
      ).createTrainingClient({ baseModel: "tiny", seed: 7, loraRank: 32 });
      const client =
        backend === "local"
          ? reference
          : await (await service(backend)).createTrainingClient({ baseModel: "tiny", seed: 7 });
      const pairs = servicePairs();
      const losses: number[] = [];
      for (const c of backend === "local" ? [client] : [client, reference]) {
        const fb = await c.forwardBackwardCustom(pairs, dpoLoss(0.5));
        const optim = await c.optimStep(SMOOTH_ADAM);
        const out = await fb.result();
        await optim.result();
        expect(out.metrics["dpo/accuracy"]).toBeGreaterThanOrEqual(0);
        losses.push(out.metrics["loss:sum"]!);
      }
      if (backend !== "local") {
        expect(losses[1]).toBeCloseTo(losses[0]!, 5);
        expect(maxAbsDiff(await logprobsOf(client, pairs), await logprobsOf(reference, pairs))).toBeLessThan(1e-4);
      }
      const after = await (await client.forwardBackwardCustom(pairs, dpoLoss(0.5))).result();
      expect(after.metrics["loss:sum"]).toBeLessThan(losses[0]! - 1e-3);
    });
  },
);

/** Starts `nexrl serve --protocol tinker` (the built CLI, in its own process) and resolves with its URL. */
async function serveTinkerCli(): Promise<string> {
  const main = join(resolve(import.meta.dirname, "../.."), "dist/cli/main.js");
  const child = spawn(process.execPath, [main, "serve", "--port", "0", "--protocol", "tinker"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  onCleanup(async () => {
    child.kill("SIGTERM");
    await exited;
  });
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise<string>((done, fail) => {
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
      if (match && stdout.includes("stop with Ctrl-C")) done(match[1]!);
    });
    child.once("exit", (code) => fail(new Error(`nexrl serve exited ${code}: ${stderr}`)));
  });
}

describe("forwardBackwardCustom through `nexrl serve --protocol tinker` in its own process", () => {
  it("trains the pairwise DPO loss as the local engine does", async () => {
    const url = await serveTinkerCli();
    const tinker = createTrainingService("tinker", { baseUrl: url, apiKey: API_KEY, ...FAST });
    onCleanup(() => tinker.close());
    const remote = await tinker.createTrainingClient({ baseModel: "tiny", seed: 7 });
    const local = await (await service("local")).createTrainingClient({ baseModel: "tiny", seed: 7, loraRank: 32 });
    const pairs = servicePairs();
    const losses: number[] = [];
    for (const client of [remote, local]) {
      const fb = await client.forwardBackwardCustom(pairs, dpoLoss(0.5));
      await (await client.optimStep(SMOOTH_ADAM)).result();
      losses.push((await fb.result()).metrics["loss:sum"]!);
    }
    expect(losses[0]).toBeCloseTo(losses[1]!, 5);
    const [after, reference] = [await logprobsOf(remote, pairs), await logprobsOf(local, pairs)];
    expect(maxAbsDiff(after, reference)).toBeLessThan(1e-4);
    const again = await (await remote.forwardBackwardCustom(pairs, dpoLoss(0.5))).result();
    expect(again.metrics["loss:sum"]).toBeLessThan(losses[0]! - 1e-3);
  });
});
