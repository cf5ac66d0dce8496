/**
 * Custom losses written in TypeScript, on any training service: {@link forwardBackwardCustom}
 * runs `forward` for the target logprobs, evaluates the user's loss and its gradient with
 * respect to every logprob here, and sends the gradient back as a linear surrogate through the
 * built-in `cross_entropy` loss. Because `cross_entropy` is L = −Σ w_t·lp_t, weights
 * w_t = −∂loss/∂lp_t give the model exactly the parameter gradient of the custom loss at the
 * current weights (the Tinker SDK's `forward_backward_custom` works the same way). It costs one
 * forward pass more than a built-in loss.
 *
 * @module
 */
import { InputError } from "../errors.js";
import type { ForwardBackwardOutput, LossFnOutput } from "../wire/results.js";
import { tensorSize, type Datum, type TensorData } from "../wire/wire.js";
import type { ApiFuture, CustomLossFn, CustomLossResult, TrainingClient } from "../contracts/training.js";

/** The two loss passes {@link forwardBackwardCustom} needs of a training client. */
export type LossPassClient = Pick<TrainingClient, "forward" | "forwardBackward">;

/** `cross_entropy` inputs of `d` with per-position `weights`; the shape of `target_tokens` is kept. */
function crossEntropyDatum(d: Datum, targets: TensorData, weights: ArrayLike<number>): Datum {
  const weightTensor: TensorData = { data: Array.from(weights), dtype: "float32" };
  if (targets.shape) weightTensor.shape = [...targets.shape];
  return { model_input: d.model_input, loss_fn_inputs: { target_tokens: targets, weights: weightTensor } };
}

function targetsOf(d: Datum, i: number): TensorData {
  const targets = d.loss_fn_inputs.target_tokens;
  if (targets === undefined)
    throw new InputError(
      `forwardBackwardCustom: datum ${i} has no loss input "target_tokens"; every datum needs the tokens whose logprobs the loss reads`,
    );
  return targets;
}

/** Checks what the loss function answered against the logprobs it was given. */
function checkResult(result: CustomLossResult, logprobs: readonly number[][]): void {
  if (typeof result !== "object" || result === null)
    throw new InputError("the custom loss function must return { loss, gradLogprobs }");
  if (!Number.isFinite(result.loss))
    throw new InputError(`the custom loss function returned loss ${String(result.loss)}; it must be a finite number`);
  const grads = result.gradLogprobs;
  if (!Array.isArray(grads) || grads.length !== logprobs.length) {
    throw new InputError(
      `the custom loss function returned gradLogprobs for ${Array.isArray(grads) ? grads.length : 0} datums; it must return one array per datum (${logprobs.length})`,
    );
  }
  grads.forEach((g: ArrayLike<number>, i) => {
    if (g?.length !== logprobs[i]!.length) {
      throw new InputError(
        `the custom loss function returned gradLogprobs[${i}] of length ${g?.length ?? 0}; datum ${i} has ${logprobs[i]!.length} logprobs`,
      );
    }
    for (let t = 0; t < g.length; t++) {
      if (!Number.isFinite(g[t]))
        throw new InputError(
          `the custom loss function returned gradLogprobs[${i}][${t}] = ${g[t]}; gradients must be finite`,
        );
    }
  });
  for (const [key, value] of Object.entries(result.metrics ?? {})) {
    if (typeof value !== "number")
      throw new InputError(
        `the custom loss function returned metric "${key}" = ${JSON.stringify(value)}; metrics must be numbers`,
      );
  }
}

/**
 * Applies a loss written in TypeScript: `forward` with `cross_entropy` (weights 0) for the
 * target logprobs, `lossFn` for the loss and ∂loss/∂lp, then `forwardBackward` with
 * `cross_entropy` and weights −∂loss/∂lp, which accumulates the custom loss's parameter gradient
 * until the next `optimStep`. Only `target_tokens` (and the weights it makes) are sent: other
 * inputs of the datums are for `lossFn` alone.
 *
 * Resolves once the gradient pass is submitted (after the forward pass has answered), so await
 * it before submitting the next operation of the same model. The result has the forward pass's
 * `logprobs` per datum, the service's metrics of the gradient pass, the loss function's metrics,
 * and `loss:sum` = the custom loss.
 *
 * @throws InputError for a datum without `target_tokens`, or a loss function that answers a
 * non-finite loss or gradients of the wrong shape (nothing is sent to the gradient pass then).
 */
export async function forwardBackwardCustom(
  client: LossPassClient,
  data: readonly Datum[],
  lossFn: CustomLossFn,
): Promise<ApiFuture<ForwardBackwardOutput>> {
  if (data.length === 0) throw new InputError("forwardBackwardCustom needs at least one datum");
  const targets = data.map(targetsOf);
  const forwardData = data.map((d, i) => crossEntropyDatum(d, targets[i]!, new Float32Array(tensorSize(targets[i]!))));
  const forward = await (await client.forward(forwardData, "cross_entropy")).result();
  const outputs: LossFnOutput[] = forward.lossFnOutputs;
  const logprobs = outputs.map((o) => Array.from(o.logprobs));
  const result = await lossFn(data, logprobs);
  checkResult(result, logprobs);
  const surrogate = data.map((d, i) => {
    const g = result.gradLogprobs[i]!;
    return crossEntropyDatum(
      d,
      targets[i]!,
      Array.from({ length: g.length }, (_, t) => -g[t]!),
    );
  });
  const backward = await client.forwardBackward(surrogate, "cross_entropy");
  const combined = backward.result().then((out) => ({
    lossFnOutputs: outputs,
    metrics: { ...out.metrics, ...result.metrics, "loss:sum": result.loss },
  }));
  // A caller that never awaits the result must not crash the process with an unhandled rejection.
  combined.catch(() => undefined);
  return { result: () => combined };
}
