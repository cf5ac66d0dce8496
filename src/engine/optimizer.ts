/**
 * AdamW with decoupled weight decay, bias correction and global-norm gradient clipping, in the
 * form of PyTorch's `torch.optim.AdamW` (which Tinker uses):
 *
 * ```
 * g   ← g · min(1, clip / (‖g‖ + 1e-6))          (when gradClipNorm > 0)
 * p   ← p · (1 − lr·wd)
 * m   ← β1·m + (1 − β1)·g
 * v   ← β2·v + (1 − β2)·g²
 * p   ← p − (lr / (1 − β1ᵗ)) · m / (√v / √(1 − β2ᵗ) + eps)
 * ```
 *
 * Weight decay applies to every parameter (biases, gains and embeddings included).
 *
 * @module
 * @internal
 */
import type { AdamParams } from "../wire/wire.js";
import { EngineError } from "../errors.js";

/** What one optimizer step did. */
export interface AdamStepReport {
  /** Global L2 norm of the gradient before clipping. */
  gradNorm: number;
  /** The factor the gradient was scaled by (1 when not clipped). */
  clipScale: number;
}

/** Adam moments and step count of one parameter buffer. */
export class AdamState {
  /** First moments. */
  readonly m: Float32Array;
  /** Second moments. */
  readonly v: Float32Array;
  /** Number of steps taken. */
  step = 0;

  /** Over the (zeroed) moment buffers `m` and `v`, one float per parameter. */
  constructor(m: Float32Array, v: Float32Array) {
    this.m = m;
    this.v = v;
  }

  /** Forgets all moments and the step count. */
  reset(): void {
    this.m.fill(0);
    this.v.fill(0);
    this.step = 0;
  }

  /**
   * Applies one AdamW step to `params` with `grads`, then zeroes `grads`.
   * @throws {@link "nexrl".EngineError | EngineError} when the gradient norm is not finite, or
   * when the step would make a weight overflow a 32-bit float (a learning rate far too large);
   * then nothing is changed except that the gradients are zeroed.
   */
  apply(params: Float32Array, grads: Float32Array, adam: AdamParams): AdamStepReport {
    let sq = 0;
    for (let i = 0; i < grads.length; i++) sq += grads[i]! * grads[i]!;
    const gradNorm = Math.sqrt(sq);
    if (!Number.isFinite(gradNorm)) {
      grads.fill(0);
      throw new EngineError(
        `the accumulated gradient has norm ${gradNorm}, so the optimizer step was skipped and the gradients discarded; look for extreme advantages or sampler logprobs far from the model's (importance ratios overflow), or lower the learning rate`,
        { code: "non_finite_gradient" },
      );
    }
    const clipScale = adam.gradClipNorm > 0 ? Math.min(1, adam.gradClipNorm / (gradNorm + 1e-6)) : 1;
    const step = this.step + 1;
    const { learningRate: lr, beta1: b1, beta2: b2, eps, weightDecay: wd } = adam;
    const stepSize = lr / (1 - b1 ** step);
    const bc2Sqrt = Math.sqrt(1 - b2 ** step);
    const decay = 1 - lr * wd;
    const { m, v } = this;
    // A first pass that writes nothing, so a step that would overflow leaves weights and moments as they were.
    const overflow = firstOverflow(params, grads, m, v, { clipScale, b1, b2, eps, stepSize, bc2Sqrt, decay });
    if (overflow !== -1) {
      grads.fill(0);
      throw new EngineError(
        `the optimizer step with learning rate ${lr} would make weights overflow a 32-bit float (weight ${overflow} first), so it was skipped and the gradients discarded; lower the learning rate (fine-tuning uses about 1e-6 to 1e-3)`,
        { code: "non_finite_update" },
      );
    }
    this.step = step;
    for (let i = 0; i < params.length; i++) {
      const g = grads[i]! * clipScale;
      const mi = b1 * m[i]! + (1 - b1) * g;
      const vi = b2 * v[i]! + (1 - b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      params[i] = params[i]! * decay - (stepSize * mi) / (Math.sqrt(vi) / bc2Sqrt + eps);
    }
    grads.fill(0);
    return { gradNorm, clipScale };
  }
}

/** The constants of one step, as {@link AdamState.apply} computes them. */
interface StepConstants {
  clipScale: number;
  b1: number;
  b2: number;
  eps: number;
  stepSize: number;
  bc2Sqrt: number;
  decay: number;
}

/** The index of the first weight the step would make non-finite as a 32-bit float, or −1. */
function firstOverflow(
  params: Float32Array,
  grads: Float32Array,
  m: Float32Array,
  v: Float32Array,
  c: StepConstants,
): number {
  for (let i = 0; i < params.length; i++) {
    const g = grads[i]! * c.clipScale;
    const mi = Math.fround(c.b1 * m[i]! + (1 - c.b1) * g);
    const vi = Math.fround(c.b2 * v[i]! + (1 - c.b2) * g * g);
    if (!Number.isFinite(Math.fround(params[i]! * c.decay - (c.stepSize * mi) / (Math.sqrt(vi) / c.bc2Sqrt + c.eps))))
      return i;
  }
  return -1;
}
