/**
 * Parameter gradients of every built-in loss against central finite differences of the loss,
 * one random direction per tensor, on a tiny model whose weights are scrambled away from their
 * initialisation (so that gains, biases and every path through the block matter).
 */
import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { Rng } from "../../src/engine/prng.js";
import { TrainingCore } from "../../src/engine/training.js";
import type { BuiltinLossName } from "../../src/contracts/losses.js";
import { datum, type Datum } from "../../src/wire/wire.js";
import { directionalDerivatives } from "./helpers.js";

const config = resolveModelConfig({ dModel: 8, nLayers: 2, nHeads: 2, contextLength: 8 }, 259);

function scrambledCore(): TrainingCore {
  const core = new TrainingCore(config, 3);
  const rng = new Rng(11);
  const w = core.weights.flat;
  for (let i = 0; i < w.length; i++) w[i] = rng.normal() * 0.4;
  return core;
}

/** Every tensor of the model by name, as views into the flat buffer. */
function tensors(core: TrainingCore, which: "weights" | "grads"): Array<[string, Float32Array]> {
  const t = core[which];
  const out: Array<[string, Float32Array]> = [
    ["wte", t.wte],
    ["wpe", t.wpe],
    ["lnfGain", t.lnfGain],
    ["lnfBias", t.lnfBias],
  ];
  t.blocks.forEach((b, l) => Object.entries(b).forEach(([k, v]) => out.push([`blocks.${l}.${k}`, v as Float32Array])));
  return out;
}

const SEQUENCES = [
  [256, 10, 200, 33, 7, 7, 90, 12, 5],
  [256, 44, 3, 250],
  [1, 2, 257, 100, 100, 60],
];

/** Datums for `loss`; RL inputs put ratios r = exp(lp − q) on both sides of PPO's clip range. */
function datums(core: TrainingCore, loss: BuiltinLossName): Datum[] {
  const base = SEQUENCES.map((s, i) =>
    datum(s.slice(0, -1), { target_tokens: s.slice(1), weights: s.slice(1).map((_, t) => ((t + i) % 3) * 0.5) }),
  );
  if (loss === "cross_entropy") return base;
  const lp = core.run(base, "cross_entropy", undefined, false).lossFnOutputs.map((o) => o.logprobs);
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

/**
 * CISPO's loss −Σ sg[clip(r_t)]·lp_t·A_t stops the gradient through the clipped ratio, so its
 * gradient is that of cross_entropy with weights clip(r_t)·A_t frozen at the current weights.
 */
function cispoSurrogate(
  core: TrainingCore,
  data: Datum[],
  cfg: Record<string, number>,
): { data: Datum[]; loss: BuiltinLossName; lossConfig: undefined } {
  const lp = core.run(data, "cispo", cfg, false).lossFnOutputs.map((o) => o.logprobs);
  const surrogate = data.map((d, i) => {
    const q = d.loss_fn_inputs.logprobs!.data;
    const a = d.loss_fn_inputs.advantages!.data;
    const weights = lp[i]!.map(
      (l, t) => Math.min(Math.max(Math.exp(l - q[t]!), cfg.clip_low_threshold!), cfg.clip_high_threshold!) * a[t]!,
    );
    return datum(
      d.model_input.chunks.flatMap((c) => (c.type === "encoded_text" ? c.tokens : [])),
      { target_tokens: d.loss_fn_inputs.target_tokens!.data, weights },
    );
  });
  return { data: surrogate, loss: "cross_entropy", lossConfig: undefined };
}

const CASES: Array<[BuiltinLossName, Record<string, number> | undefined]> = [
  ["cross_entropy", undefined],
  ["importance_sampling", undefined],
  ["ppo", undefined],
  ["cispo", { clip_low_threshold: 0.7, clip_high_threshold: 1.3 }],
  ["dro", { beta: 0.5 }],
];

describe("parameter gradients match finite differences of the loss", () => {
  it.each(CASES)("%s", (loss, lossConfig) => {
    const core = scrambledCore();
    const data = datums(core, loss);
    core.run(data, loss, lossConfig, true);
    const probe = loss === "cispo" ? cispoSurrogate(core, data, lossConfig!) : { data, loss, lossConfig };
    const lossAt = (): number => core.run(probe.data, probe.loss, probe.lossConfig, false).metrics["loss:sum"]!;
    const rng = new Rng(5);
    const eps = 1e-2;
    const grads = new Map(tensors(core, "grads"));
    let checked = 0;
    for (const [name, w] of tensors(core, "weights")) {
      const g = grads.get(name)!;
      // A random unit direction over this tensor only.
      const { analytic, numeric } = directionalDerivatives(w, g, rng, eps, lossAt);
      // float32 forward passes leave ~1e-4 of noise in the difference quotient.
      expect(Math.abs(numeric - analytic), `${loss} ${name}: analytic ${analytic}, numeric ${numeric}`).toBeLessThan(
        1e-2 * Math.abs(analytic) + 1e-4,
      );
      if (Math.abs(analytic) > 5e-3) checked++;
    }
    // Most tensors must have a gradient large enough for the check to be meaningful.
    expect(checked).toBeGreaterThan(20);
  });
});
