import { ConfigError } from "../../errors.js";
/**
 * Which generation of the Tinker protocol the client speaks with a server, chosen as the
 * official SDK chooses it: the client announces an `sdk_version` in `client/config`, the server
 * answers the flags it resolved for that version, and the version's own rules turn the flags
 * into a wire format.
 *
 * The client implements the rules of three SDK releases exactly, and announces the release whose
 * rules it follows (a server resolves its flags for the version it is told, so announcing a
 * version means promising its behaviour):
 *
 * | `wire`     | announces | forward_backward                      | forward                                   | results asked for                         |
 * |------------|-----------|---------------------------------------|-------------------------------------------|-------------------------------------------|
 * | `json`     | 0.18.2    | JSON                                  | JSON `/forward`                           | `application/x-protobuf, application/json` |
 * | `auto`     | 0.24.1    | protobuf if `proto_write_fwdbwd`, else JSON | forward_only protobuf if also `fwd_via_fwdbwd`, else JSON `/forward` | `application/x-protobuf, application/json` |
 * | `protobuf` | 0.25.0    | protobuf                              | forward_only protobuf                     | `application/x-protobuf`                  |
 *
 * 0.18.2 is the last release without `proto_write_fwdbwd` (it always writes JSON); 0.24.1 the
 * last that lets the server pick (0.19–0.24.1 share that rule; 0.24.1 adds `fwd_via_fwdbwd`);
 * 0.25.0 always writes protobuf. A protobuf body is zstd-compressed when the server sets
 * `proto_compress_fwdbwd` (0.24.1: only together with `proto_write_fwdbwd`). Every generation
 * reads JSON or protobuf results by the answer's `content-type`.
 *
 * @module
 */

/** Which generation to speak: `auto` (the server decides through its flags), `json` or `protobuf`. */
export type TinkerWire = "auto" | "json" | "protobuf";

/** The values of {@link TinkerWire}. */
export const TINKER_WIRES: readonly TinkerWire[] = ["auto", "json", "protobuf"];

/** The environment variable that chooses the wire when the options do not. */
export const TINKER_WIRE_ENV = "NEXRL_TINKER_WIRE";

/** The SDK release each wire follows (see the module comment for why these three). */
const SDK_VERSIONS: Readonly<Record<TinkerWire, string>> = {
  json: "0.18.2",
  auto: "0.24.1",
  protobuf: "0.25.0",
};

/**
 * The wire to speak: `option` when given, else `NEXRL_TINKER_WIRE`, else `auto`.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a value that is none of `auto`, `json`, `protobuf`.
 */
export function resolveWire(option: string | undefined, env: Readonly<Record<string, string | undefined>>): TinkerWire {
  const [value, source] = option !== undefined ? [option, "wire"] : [env[TINKER_WIRE_ENV] || "auto", TINKER_WIRE_ENV];
  if (!(TINKER_WIRES as readonly string[]).includes(value))
    throw new ConfigError(`${source} is "${value}"; use one of ${TINKER_WIRES.join(", ")}`);
  return value as TinkerWire;
}

/** The `sdk_version` announced for `wire`. */
export function announcedSdkVersion(wire: TinkerWire): string {
  return SDK_VERSIONS[wire];
}

/**
 * The `client/config` flags the client acts on, with the defaults of the announced release.
 * Named as the server sends them (snake_case), so that a flag reads the same here and in its answer.
 */
export interface TinkerFlags {
  /** Trade the API key for a JWT at `/api/v1/auth/token` and send that (default false). */
  pjwt_auth_enabled: boolean;
  /** Submit the chunks of one forward_backward together, the first last (0.18.2: false; later: true). */
  parallel_fwdbwd_chunks: boolean;
  /** 0.19–0.24.1: write forward_backward as protobuf (default false). */
  proto_write_fwdbwd: boolean;
  /** 0.22.3–0.24.1: send forward as forward_backward with `forward_only` (with `proto_write_fwdbwd`). */
  fwd_via_fwdbwd: boolean;
  /** zstd-compress protobuf forward_backward bodies (default false). */
  proto_compress_fwdbwd: boolean;
  /** Most datums per forward_backward request (1024). */
  fwdbwd_max_chunk_len: number;
  /** Most estimated bytes per forward_backward request (5 000 000). */
  fwdbwd_max_chunk_bytes_count: number;
  /** How long 402 (billing) answers are waited out before they fail the call, in seconds (3600). */
  billing_exception_max_pause_duration_sec: number;
  /** Most sampling requests in flight per sampling client (2000). */
  sample_max_concurrent_requests: number;
}

/** What was agreed with a server: the wire of each call and the flags behind it. */
export interface TinkerNegotiation {
  /** The wire asked for (option, environment or `auto`). */
  wire: TinkerWire;
  /** The `sdk_version` announced. */
  sdkVersion: string;
  /** Body format of `forward_backward`. */
  forwardBackward: "json" | "protobuf";
  /** How `forward` is sent: JSON `/forward`, or protobuf `forward_backward` with `forward_only`. */
  forward: "json" | "forward_only";
  /** Whether protobuf bodies are zstd-compressed. */
  compressed: boolean;
  /** `Accept` of polls for sample and forward_backward results. */
  accept: string;
  /** The flags, defaults of the announced release filled in. */
  flags: TinkerFlags;
  /** Every flag the server answered, as it answered them (unknown ones included). */
  serverFlags: Readonly<Record<string, unknown>>;
}

/**
 * What `wire` does with the flags a server answered (`client/config`), by the rules of the
 * release it announces. Flags of the wrong type are ignored, as the SDK's models would reject
 * them.
 */
export function negotiate(wire: TinkerWire, serverFlags: Readonly<Record<string, unknown>>): TinkerNegotiation {
  const bool = (key: string, fallback: boolean): boolean =>
    typeof serverFlags[key] === "boolean" ? (serverFlags[key] as boolean) : fallback;
  const count = (key: string, fallback: number): number => {
    const value = serverFlags[key];
    return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
  };
  const flags: TinkerFlags = {
    pjwt_auth_enabled: bool("pjwt_auth_enabled", false),
    parallel_fwdbwd_chunks: bool("parallel_fwdbwd_chunks", wire !== "json"),
    proto_write_fwdbwd: bool("proto_write_fwdbwd", false),
    fwd_via_fwdbwd: bool("fwd_via_fwdbwd", false),
    proto_compress_fwdbwd: bool("proto_compress_fwdbwd", false),
    fwdbwd_max_chunk_len: Math.max(1, count("fwdbwd_max_chunk_len", 1024)),
    fwdbwd_max_chunk_bytes_count: count("fwdbwd_max_chunk_bytes_count", 5_000_000),
    billing_exception_max_pause_duration_sec: count("billing_exception_max_pause_duration_sec", 3600),
    sample_max_concurrent_requests: Math.max(1, count("sample_max_concurrent_requests", 2000)),
  };
  const protobuf = wire === "protobuf" || (wire === "auto" && flags.proto_write_fwdbwd);
  return {
    wire,
    sdkVersion: announcedSdkVersion(wire),
    forwardBackward: protobuf ? "protobuf" : "json",
    forward: wire === "protobuf" || (protobuf && flags.fwd_via_fwdbwd) ? "forward_only" : "json",
    compressed: protobuf && flags.proto_compress_fwdbwd,
    accept: wire === "protobuf" ? "application/x-protobuf" : "application/x-protobuf, application/json",
    flags,
    serverFlags: { ...serverFlags },
  };
}
