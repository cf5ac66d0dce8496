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
import type { AdamParams } from "../types/wire.js";
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
   * @throws {@link "nexrl".EngineError | EngineError} when the gradient norm is not finite; then nothing
   * is changed except that the gradients are zeroed.
   */
  apply(params: Float32Array, grads: Float32Array, adam: AdamParams): AdamStepReport {
    let sq = 0;
    for (let i = 0; i < grads.length; i++) sq += grads[i]! * grads[i]!;
    const gradNorm = Math.sqrt(sq);
    if (!Number.isFinite(gradNorm)) {
      grads.fill(0);
      throw new EngineError(
        "non_finite_gradient",
        `the accumulated gradient has norm ${gradNorm}, so the optimizer step was skipped and the gradients discarded; look for extreme advantages or sampler logprobs far from the model's (importance ratios overflow), or lower the learning rate`,
      );
    }
    const clipScale = adam.gradClipNorm > 0 ? Math.min(1, adam.gradClipNorm / (gradNorm + 1e-6)) : 1;
    this.step += 1;
    const { learningRate: lr, beta1: b1, beta2: b2, eps, weightDecay: wd } = adam;
    const stepSize = lr / (1 - b1 ** this.step);
    const bc2Sqrt = Math.sqrt(1 - b2 ** this.step);
    const decay = 1 - lr * wd;
    const { m, v } = this;
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
