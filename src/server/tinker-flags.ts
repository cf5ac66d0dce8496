import { ConfigError } from "../errors.js";
/**
 * The `client/config` flags a Tinker server may answer (the fields of the SDK's
 * `ClientConfigResponse`, 0.18 to 0.25), for `nexrl serve --tinker-flag KEY=VALUE`.
 *
 * @module
 */

/** Each flag and the type of its value. */
export const TINKER_FLAG_TYPES: Readonly<Record<string, "boolean" | "integer" | "string">> = Object.freeze({
  pjwt_auth_enabled: "boolean",
  credential_default_source: "string",
  sample_dispatch_bytes_semaphore_size: "integer",
  inflight_response_bytes_semaphore_size: "integer",
  parallel_fwdbwd_chunks: "boolean",
  proto_write_fwdbwd: "boolean",
  proto_compress_fwdbwd: "boolean",
  fwd_via_fwdbwd: "boolean",
  fwdbwd_max_chunk_len: "integer",
  fwdbwd_max_chunk_bytes_count: "integer",
  fwdbwd_dispatch_bytes_semaphore_size: "integer",
  billing_exception_max_pause_duration_sec: "integer",
  sample_no_retries: "boolean",
  sample_enable_stuck_detection: "boolean",
  sample_max_concurrent_requests: "integer",
  use_pyqwest_transport: "boolean",
});

/** Flags the SDK defines that `nexrl serve` cannot honour, and why. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  create_model_via_load_weights:
    "nexrl serve does not create models from load_weights requests; leave it unset (the SDK then uses weights_info, create_model and load_weights)",
};

/**
 * Parses `KEY=VALUE` into a flag and its typed value (`true`/`false`, an integer, or text).
 * @throws {@link "nexrl".ConfigError | ConfigError} for an unknown or unsupported flag or a value of the wrong type.
 */
export function parseTinkerFlag(spec: string): [string, boolean | number | string] {
  const at = spec.indexOf("=");
  const key = at < 0 ? spec : spec.slice(0, at);
  const text = at < 0 ? "" : spec.slice(at + 1);
  if (UNSUPPORTED[key]) throw new ConfigError(`${key}: ${UNSUPPORTED[key]}`);
  const type = TINKER_FLAG_TYPES[key];
  if (at < 0 || !type)
    throw new ConfigError(
      `bad Tinker flag "${spec}"; write KEY=VALUE with KEY one of ${Object.keys(TINKER_FLAG_TYPES).join(", ")}`,
    );
  if (type === "boolean") {
    if (text !== "true" && text !== "false") throw new ConfigError(`${key} takes true or false, got "${text}"`);
    return [key, text === "true"];
  }
  if (type === "integer") {
    const value = Number(text);
    if (text.trim() === "" || !Number.isSafeInteger(value) || value < 0)
      throw new ConfigError(`${key} takes a non-negative integer, got "${text}"`);
    return [key, value];
  }
  return [key, text];
}
