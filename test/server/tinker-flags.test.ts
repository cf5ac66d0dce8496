/**
 * `nexrl serve --tinker-flag KEY=VALUE`: the flags of the SDK's `ClientConfigResponse`, typed,
 * and every way a flag can be refused.
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import { parseTinkerFlag, TINKER_FLAG_TYPES } from "../../src/server/tinker-flags.js";

/** The message `parseTinkerFlag(spec)` refuses with. */
function refusal(spec: string): string {
  try {
    parseTinkerFlag(spec);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`${spec} was accepted`);
}

describe("parseTinkerFlag", () => {
  it("types booleans, non-negative integers and text", () => {
    expect(parseTinkerFlag("proto_write_fwdbwd=true")).toEqual(["proto_write_fwdbwd", true]);
    expect(parseTinkerFlag("sample_no_retries=false")).toEqual(["sample_no_retries", false]);
    expect(parseTinkerFlag("fwdbwd_max_chunk_len=0")).toEqual(["fwdbwd_max_chunk_len", 0]);
    expect(parseTinkerFlag("sample_max_concurrent_requests=64")).toEqual(["sample_max_concurrent_requests", 64]);
    // Text keeps everything after the first "=", "=" included.
    expect(parseTinkerFlag("credential_default_source=env=A")).toEqual(["credential_default_source", "env=A"]);
    expect(parseTinkerFlag("credential_default_source=")).toEqual(["credential_default_source", ""]);
  });

  it("refuses a value of the wrong type, naming the flag and the value", () => {
    expect(refusal("proto_write_fwdbwd=yes")).toBe('proto_write_fwdbwd takes true or false, got "yes"');
    expect(refusal("proto_write_fwdbwd=")).toBe('proto_write_fwdbwd takes true or false, got ""');
    for (const bad of ["-1", "1.5", "", " ", "1e400", "9007199254740993", "ten"])
      expect(refusal(`fwdbwd_max_chunk_len=${bad}`)).toBe(
        `fwdbwd_max_chunk_len takes a non-negative integer, got "${bad}"`,
      );
  });

  it("refuses an unknown flag or one without a value with the list of flags, and an unsupported one with why", () => {
    const list = Object.keys(TINKER_FLAG_TYPES).join(", ");
    expect(refusal("no_such_flag=1")).toBe(`bad Tinker flag "no_such_flag=1"; write KEY=VALUE with KEY one of ${list}`);
    expect(refusal("proto_write_fwdbwd")).toBe(
      `bad Tinker flag "proto_write_fwdbwd"; write KEY=VALUE with KEY one of ${list}`,
    );
    expect(refusal("create_model_via_load_weights=true")).toMatch(
      /^create_model_via_load_weights: nexrl serve does not create models from load_weights requests; leave it unset/,
    );
    expect(Object.keys(TINKER_FLAG_TYPES)).toHaveLength(16);
  });
});
