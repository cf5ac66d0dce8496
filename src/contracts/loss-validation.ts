/**
 * The checks a datum passes before it is sent to a training service (or run by the local engine
 * or `nexrl serve`): the loss exists on the backend, every input its contract names is there
 * with the right dtype and one finite value per position, and nothing the backend rejects.
 * @module
 */
import { getLossFunction, LOSS_MASK, type LossBackend, type LossFunctionName } from "./losses.js";
import { resolveLossConfig, type LossInputSpec } from "../wire/loss-math.js";
import { modelInputLength, tensorSize, tensorValues, type Datum } from "../wire/wire.js";
import { InputError } from "../errors.js";

/** Inputs a backend requires beyond the contract's own. */
const EXTRA_REQUIRED: Partial<Record<LossBackend, Partial<Record<LossFunctionName, Record<string, LossInputSpec>>>>> = {
  // Weaver's importance_sampling masks explicitly instead of through zero advantages.
  weaver: { importance_sampling: { loss_mask: LOSS_MASK } },
};

/** Throws unless every value of loss input `key` is finite. */
function checkFinite(where: string, key: string, values: readonly number[]): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isFinite(v)) throw new InputError(`${where}: loss input "${key}"[${i}] is ${v}; values must be finite`);
  }
}

/** Throws unless every value of `target_tokens` is a token id (or, on Weaver, -100 for an ignored position). */
function checkTokenIds(where: string, values: readonly number[], weaver: boolean): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!(Number.isInteger(v) && (v >= 0 || (weaver && v === -100)))) {
      throw new InputError(
        `${where}: ${Number.isFinite(v) ? `target_tokens[${i}] is ${v}; expected a non-negative token id${weaver ? " or -100 (ignored)" : ""}` : `loss input "target_tokens"[${i}] is ${v}; values must be finite`}`,
      );
    }
  }
}

/** Options of {@link validateLossInputs}. */
export interface ValidateLossInputsOptions {
  /** The backend the datum is going to; its rules on extra and missing keys apply. */
  backend: LossBackend;
  /** The `loss_fn_config` that will be sent; unknown keys are reported. */
  config?: Readonly<Record<string, number>>;
}

/**
 * Checks that `datum` satisfies loss `lossFn` on `backend`: the loss exists there, every required
 * input is present with the right dtype and one value per position, values are finite and
 * target tokens are valid ids, and no key is present that the backend rejects (Tinker and the
 * local engine reject any key outside the contract, `mask` and `loss_mask` included; Weaver's
 * `importance_sampling` requires `loss_mask`).
 * @throws {@link "nexrl/errors".InputError | InputError} with a message naming the loss, the backend and the key.
 */
export function validateLossInputs(lossFn: string, datum: Datum, options: ValidateLossInputsOptions): void {
  const { backend } = options;
  const contract = getLossFunction(lossFn);
  const where = `${lossFn} on ${backend}`;
  if (!contract.backends.includes(backend)) {
    throw new InputError(
      `${where}: this backend does not offer ${lossFn}; it is offered by ${contract.backends.join(", ")}`,
    );
  }
  const required: Record<string, LossInputSpec> = { ...contract.inputs, ...EXTRA_REQUIRED[backend]?.[contract.name] };
  const n = modelInputLength(datum.model_input);
  for (const [key, spec] of Object.entries(required)) {
    const tensor = datum.loss_fn_inputs[key];
    if (!tensor) throw new InputError(`${where}: missing loss input "${key}" (${spec.dtype}: ${spec.description})`);
    if (tensor.dtype !== spec.dtype)
      throw new InputError(`${where}: loss input "${key}" has dtype ${tensor.dtype}, expected ${spec.dtype}`);
  }
  for (const [key, tensor] of Object.entries(datum.loss_fn_inputs)) {
    if (!(key in required) && !contract.serverDefined && backend !== "weaver") {
      const hint = key === "mask" || key === "loss_mask" ? "; mask through zero advantages or weights instead" : "";
      throw new InputError(
        `${where}: loss input "${key}" is rejected by ${backend}, which accepts only ${Object.keys(required).join(", ")}${hint}`,
      );
    }
    const size = tensorSize(tensor);
    if (size !== n)
      throw new InputError(`${where}: loss input "${key}" has ${size} values but the model input has ${n} positions`);
    const values = tensorValues(tensor);
    if (key === "target_tokens") checkTokenIds(where, values, backend === "weaver");
    else checkFinite(where, key, values);
  }
  if (options.config && !contract.serverDefined) resolveLossConfig(where, contract.config, options.config);
}
