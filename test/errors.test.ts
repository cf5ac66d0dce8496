/**
 * src/errors.ts: every class's one constructor shape (`message, options`), its `code`, the
 * factories that word messages, `isInstance` across copies of the module, and the deprecated
 * getters that still answer.
 */
import { describe, expect, it } from "vitest";
import * as errors from "../src/errors.js";
import {
  APIConnectionError,
  APIError,
  APITimeoutError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  ConfigError,
  ConflictError,
  ContextLengthError,
  DistributedError,
  EngineError,
  Halted,
  InputError,
  InternalServerError,
  JudgeError,
  ListenError,
  NexrlError,
  NotFoundError,
  OperationFailure,
  PaymentRequiredError,
  PermissionDeniedError,
  ProtocolError,
  RateLimitError,
  RecipeError,
  RelayCallError,
  RemoteOperationError,
  RemoteRolloutError,
  RolloutError,
  RunError,
  StorageError,
  storageError,
  UnexpectedResponseError,
  UnprocessableEntityError,
  UsageError,
  UserCodeError,
} from "../src/errors.js";

const request = { method: "POST", url: "http://127.0.0.1:1/api/v1/forward" };
const origin = { index: 3, groupId: "g3", runId: 1, isVal: false };

/** Each class, the options it needs besides `cause`, and the code it then carries. */
const SHAPES: Array<[typeof NexrlError, Record<string, unknown>, string]> = [
  [NexrlError, {}, "error"],
  [NexrlError, { code: "custom" }, "custom"],
  [APIError, { ...request, isRetryable: false, status: 418 }, "api_error"],
  [BadRequestError, { ...request, isRetryable: false, status: 400 }, "bad_request"],
  [AuthenticationError, { ...request, isRetryable: false, status: 401 }, "authentication"],
  [PaymentRequiredError, { ...request, isRetryable: false, status: 402 }, "payment_required"],
  [PermissionDeniedError, { ...request, isRetryable: false, status: 403 }, "permission_denied"],
  [NotFoundError, { ...request, isRetryable: false, status: 404 }, "not_found"],
  [ConflictError, { ...request, isRetryable: false, status: 409 }, "conflict"],
  [UnprocessableEntityError, { ...request, isRetryable: false, status: 422 }, "unprocessable_entity"],
  [RateLimitError, { ...request, isRetryable: true, status: 429 }, "rate_limited"],
  [InternalServerError, { ...request, isRetryable: true, status: 500 }, "server_error"],
  [APIConnectionError, { ...request, connected: false }, "connection_failed"],
  [APITimeoutError, { ...request, timeoutMs: 5 }, "timeout"],
  [APIUserAbortError, request, "aborted"],
  [RemoteOperationError, { service: "tinker", category: "user", serviceMessage: "bad" }, "remote_operation_failed"],
  [UnexpectedResponseError, {}, "unexpected_response"],
  [ConfigError, {}, "invalid_config"],
  [ListenError, { code: "address_in_use" }, "address_in_use"],
  [DistributedError, {}, "redis_unavailable"],
  [UsageError, {}, "usage"],
  [RecipeError, {}, "invalid_recipe"],
  [RecipeError, { code: "wrong_base" }, "wrong_base"],
  [InputError, { field: "tokens" }, "invalid_input"],
  [ContextLengthError, { what: "prompt", length: 9, contextLength: 8 }, "context_length_exceeded"],
  [UserCodeError, { code: "hung" }, "hung"],
  [JudgeError, { reply: "maybe" }, "judge_failed"],
  [RolloutError, { origin, attempts: 2 }, "rollout_failed"],
  [RunError, { code: "damaged_checkpoint" }, "damaged_checkpoint"],
  [EngineError, { code: "closed" }, "closed"],
  [StorageError, { code: "disk_full", path: "/tmp/x" }, "disk_full"],
  [ProtocolError, { status: 404, code: "not_found" }, "not_found"],
  [OperationFailure, { category: "server" }, "operation_failed"],
  [Halted, {}, "halted"],
  [RemoteRolloutError, { isRetryable: true }, "remote_rollout_failed"],
  [RelayCallError, { status: 500, isRetryable: false }, "relay_call_failed"],
];

/** Constructs `Class` in the one shape. */
function make(Class: typeof NexrlError, message: string, options: Record<string, unknown>): NexrlError {
  return new (Class as new (message: string, options: Record<string, unknown>) => NexrlError)(message, options);
}

describe("the one constructor shape", () => {
  it("covers every error class the module exports", () => {
    const classes = Object.values(errors).filter(
      (value): value is typeof NexrlError => typeof value === "function" && NexrlError.isInstance(value.prototype),
    );
    expect(new Set(SHAPES.map(([Class]) => Class))).toEqual(new Set(classes));
    expect(classes).toHaveLength(34);
  });

  it.each(SHAPES.map(([Class, options, code]) => [Class.name, Class, options, code] as const))(
    "%s(message, { cause, … }) keeps the message and the cause, and names its code",
    (name, Class, options, code) => {
      const cause = new Error("underneath");
      const error = make(Class, `${name} went wrong`, { ...options, cause });
      expect(error.message).toBe(`${name} went wrong`);
      expect(error.cause).toBe(cause);
      expect(error.code).toBe(code);
      expect(error.name).toBe(name);
      expect(error).toBeInstanceOf(Class);
      expect(error).toBeInstanceOf(NexrlError);
      expect(error).toBeInstanceOf(Error);
      expect(Class.isInstance(error)).toBe(true);
      // Without a cause there is no `cause` property at all, as with `new Error(message)`.
      expect(Object.hasOwn(make(Class, "x", options), "cause")).toBe(false);
    },
  );

  it("keeps each class's details", () => {
    const api = new RateLimitError("slow down", {
      ...request,
      status: 429,
      isRetryable: true,
      headers: { "retry-after": "2" },
      body: { message: "slow down" },
      requestId: "r1",
      retryAfterMs: 2000,
    });
    expect([api.method, api.url, api.status, api.isRetryable, api.requestId, api.retryAfterMs]).toEqual([
      "POST",
      request.url,
      429,
      true,
      "r1",
      2000,
    ]);
    expect([api.headers, api.body, api.requestHeaders]).toEqual([{ "retry-after": "2" }, { message: "slow down" }, {}]);
    const connection = new APIConnectionError("broke", { ...request, connected: true });
    expect([connection.connected, connection.isRetryable, connection.status]).toEqual([true, true, undefined]);
    const timeout = new APITimeoutError("late", { ...request, timeoutMs: 250 });
    expect([timeout.timeoutMs, timeout.connected, timeout.isRetryable]).toEqual([250, true, true]);
    expect(new APIUserAbortError("stop", request).isRetryable).toBe(false);
    const remote = new RemoteOperationError("failed", {
      service: "weaver",
      category: "server",
      serviceMessage: "oom",
      serviceCode: "resource_exhausted",
      details: { gpu: 0 },
    });
    expect([remote.service, remote.category, remote.serviceMessage, remote.serviceCode, remote.details]).toEqual([
      "weaver",
      "server",
      "oom",
      "resource_exhausted",
      { gpu: 0 },
    ]);
    expect(new InputError("bad", { field: "tokens" }).field).toBe("tokens");
    expect(new InputError("bad").field).toBeUndefined();
    expect(new JudgeError("no verdict", { reply: "hmm" }).reply).toBe("hmm");
    expect(new JudgeError("no verdict").reply).toBeUndefined();
    const rollout = new RolloutError("failed", { origin, attempts: 3 });
    expect([rollout.origin, rollout.attempts]).toEqual([origin, 3]);
    const holder = { pid: 7, host: "h", startedAt: "2026-01-01T00:00:00Z", command: "nexrl run" };
    const locked = new RunError("locked", { code: "locked", holder });
    expect([locked.holder, locked.changed]).toEqual([holder, []]);
    const changed = [{ key: "data.seed", before: "1", after: "2" }];
    expect(new RunError("differs", { code: "resume_settings", changed }).changed).toEqual(changed);
    const state = new EngineError("cannot load", { code: "state_file", path: "/s", stateFileProblem: "truncated" });
    expect([state.path, state.stateFileProblem, state.workerStack]).toEqual(["/s", "truncated", undefined]);
    expect(new StorageError("full", { code: "quota", path: "/q" }).path).toBe("/q");
    const protocol = new ProtocolError("gone", { status: 410, code: "gone", headers: { "retry-after": "3" } });
    expect([protocol.status, protocol.openaiCode, protocol.headers, protocol.openaiType, protocol.param]).toEqual([
      410,
      "gone",
      { "retry-after": "3" },
      undefined,
      null,
    ]);
    const openai = new ProtocolError("bad", { status: 400, openaiType: "invalid_request_error", param: "model" });
    expect([openai.code, openai.openaiCode, openai.openaiType, openai.param]).toEqual([
      "protocol_error",
      null,
      "invalid_request_error",
      "model",
    ]);
    expect(new OperationFailure("no", { category: "user" }).category).toBe("user");
    expect(new RemoteRolloutError("w: failed", { isRetryable: false }).isRetryable).toBe(false);
    const relay = new RelayCallError("refused", { status: 503, isRetryable: true });
    expect([relay.status, relay.isRetryable]).toEqual([503, true]);
  });
});

describe("the factories that word messages", () => {
  it("RecipeError.fromIssues lists every issue under a heading naming the file", () => {
    const cause = new Error("yaml");
    const error = RecipeError.fromIssues(
      [
        { keyPath: "trainer.total_train_step", message: "unknown key", definedIn: "/r/common.yaml:31" },
        { keyPath: "", message: "the top level must be a map" },
      ],
      { file: "/r/local.yaml", cause },
    );
    expect(error.message).toBe(
      [
        "Invalid recipe /r/local.yaml:",
        "  - trainer.total_train_step: unknown key (set in /r/common.yaml:31)",
        "  - (top level): the top level must be a map",
      ].join("\n"),
    );
    expect([error.file, error.issues.length, error.cause, error.code]).toEqual([
      "/r/local.yaml",
      2,
      cause,
      "invalid_recipe",
    ]);
    const module = RecipeError.fromIssues([{ keyPath: "trainer.class", message: "not a trainer" }], {
      code: "wrong_base",
    });
    expect(module.message).toBe("Invalid recipe:\n  - trainer.class: not a trainer");
    expect(module.code).toBe("wrong_base");
    // Constructed from a worded message, the message is the one issue.
    expect(new RecipeError("no recipe").issues).toEqual([{ keyPath: "", message: "no recipe" }]);
  });

  it("APIError.fromStatus picks the status's class and code", () => {
    const details = { ...request, body: { message: "nope" }, headers: {}, hint: "check it." };
    const codes = [400, 401, 402, 403, 404, 409, 422, 429, 418, 503].map((status) => {
      const error = APIError.fromStatus({ ...details, status });
      return [error.constructor.name, error.code, error.isRetryable];
    });
    expect(codes).toEqual([
      ["BadRequestError", "bad_request", false],
      ["AuthenticationError", "authentication", false],
      ["PaymentRequiredError", "payment_required", false],
      ["PermissionDeniedError", "permission_denied", false],
      ["NotFoundError", "not_found", false],
      ["ConflictError", "conflict", false],
      ["UnprocessableEntityError", "unprocessable_entity", false],
      ["RateLimitError", "rate_limited", true],
      ["APIError", "api_error", false],
      ["InternalServerError", "server_error", true],
    ]);
    expect(APIError.fromStatus({ ...details, status: 404, requestId: "r9" }).message).toBe(
      `POST ${request.url} failed with HTTP 404: nope (request id r9). check it.`,
    );
  });

  it("the connection, timeout, abort and context-length factories word their messages", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const never = APIConnectionError.fromCause(request, false, refused);
    expect(never.message).toBe(
      `POST ${request.url}: could not connect (connection refused: nothing listens on 127.0.0.1:1); check the base URL and that the service is running`,
    );
    expect([never.connected, never.cause, never.code]).toEqual([false, refused, "connection_failed"]);
    const broke = APIConnectionError.fromCause(request, true, new Error("socket hang up"));
    expect(broke.message).toBe(
      `POST ${request.url}: the connection broke before the service answered (socket hang up); the service may or may not have handled the request`,
    );
    const late = APITimeoutError.fromTimeout(request, 30);
    expect(late.message).toBe(
      `POST ${request.url} got no answer within 30 ms; raise the timeout (timeoutMs) if the service is slow`,
    );
    expect(APITimeoutError.fromTimeout(request, 30, "wait longer").message).toMatch(/within 30 ms; wait longer$/);
    const aborted = APIUserAbortError.fromReason(request, "the client was closed");
    expect(aborted.message).toBe(`POST ${request.url} was aborted: the client was closed`);
    const long = ContextLengthError.fromLengths("datum 3", 130, 128, "shorten it");
    expect(long.message).toBe("datum 3 has 130 tokens but the model's context length is 128; shorten it");
    expect([long.what, long.length, long.contextLength, long.field]).toEqual(["datum 3", 130, 128, undefined]);
  });

  it("storageError turns a full disk into a StorageError naming the file, and passes other errors through", () => {
    const enospc = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    const error = storageError("/runs/a/metrics.jsonl", enospc) as StorageError;
    expect(error).toBeInstanceOf(StorageError);
    expect([error.code, error.path, error.cause]).toEqual(["disk_full", "/runs/a/metrics.jsonl", enospc]);
    expect(error.message).toBe(
      "cannot write /runs/a/metrics.jsonl: no space is left on its disk (ENOSPC); free space on that disk, or choose a folder elsewhere, and try again",
    );
    const other = Object.assign(new Error("EISDIR"), { code: "EISDIR" });
    expect(storageError("/runs/a", other)).toBe(other);
  });
});

describe("isInstance", () => {
  /** A second copy of src/errors.ts, loaded from another URL: its classes are not ours. */
  async function secondCopy(): Promise<typeof errors> {
    const url = new URL("../src/errors.ts?second-copy", import.meta.url).href;
    return (await import(/* @vite-ignore */ url)) as typeof errors;
  }

  it("recognises errors of another copy of the package, where instanceof cannot", async () => {
    const copy = await secondCopy();
    expect(copy.RunError).not.toBe(RunError);
    const theirs = new copy.RunError("locked", { code: "locked" });
    expect(theirs instanceof RunError).toBe(false);
    expect(RunError.isInstance(theirs)).toBe(true);
    expect(NexrlError.isInstance(theirs)).toBe(true);
    expect(ConfigError.isInstance(theirs)).toBe(false);
    // Subclasses of subclasses: a copy's RecipeError is a ConfigError here, not a UsageError.
    const recipe = copy.RecipeError.fromIssues([{ keyPath: "a", message: "b" }]);
    expect([ConfigError.isInstance(recipe), RecipeError.isInstance(recipe), UsageError.isInstance(recipe)]).toEqual([
      true,
      true,
      false,
    ]);
    const timeout = copy.APITimeoutError.fromTimeout(request, 5);
    expect([
      APIError.isInstance(timeout),
      APIConnectionError.isInstance(timeout),
      APITimeoutError.isInstance(timeout),
    ]).toEqual([true, true, true]);
    expect(APIUserAbortError.isInstance(timeout)).toBe(false);
    // And the other way round.
    expect(copy.StorageError.isInstance(new StorageError("full", { code: "disk_full", path: "/x" }))).toBe(true);
    expect(copy.InputError.isInstance(new ContextLengthError("long", { what: "p", length: 2, contextLength: 1 }))).toBe(
      true,
    );
  });

  it("recognises a class branded by hand as another copy would brand it", () => {
    const brand = Symbol.for("nexrl.brand");
    class TheirNexrlError extends Error {
      static readonly [brand]: string = "nexrl.NexrlError";
    }
    class TheirEngineError extends TheirNexrlError {
      static override readonly [brand]: string = "nexrl.EngineError";
    }
    expect(EngineError.isInstance(new TheirEngineError("closed"))).toBe(true);
    expect(NexrlError.isInstance(new TheirEngineError("closed"))).toBe(true);
    expect(RunError.isInstance(new TheirEngineError("closed"))).toBe(false);
  });

  it("says false for anything else", () => {
    for (const value of [undefined, null, "RunError", 42, {}, new Error("plain"), Object.create(null), RunError])
      expect(NexrlError.isInstance(value)).toBe(false);
    expect(RunError.isInstance(new EngineError("closed", { code: "closed" }))).toBe(false);
    expect(APIError.isInstance(new InputError("bad"))).toBe(false);
  });
});

describe("the deprecated getters", () => {
  it("problem and moduleFailure answer what code says", () => {
    expect(new RunError("x", { code: "stalled" }).problem).toBe("stalled");
    expect(new EngineError("x", { code: "non_finite_gradient" }).problem).toBe("non_finite_gradient");
    expect(new UserCodeError("x", { code: "timeout" }).problem).toBe("timeout");
    expect(new ListenError("x", { code: "bad_host" }).problem).toBe("bad_host");
    expect(new StorageError("x", { code: "read_only", path: "/r" }).problem).toBe("read_only");
    expect(new RecipeError("x", { code: "missing_export" }).moduleFailure).toBe("missing_export");
    expect(new RecipeError("x").moduleFailure).toBeUndefined();
  });
});
