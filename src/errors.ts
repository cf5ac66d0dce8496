/**
 * Every error nexrl throws on purpose, in one module. All extend {@link NexrlError}; each message
 * says what was wrong and how to fix it.
 *
 * - A request to a service (Tinker, Weaver, an OpenAI-compatible server) that failed:
 *   {@link APIError}, with a subclass per common HTTP status, {@link APIConnectionError} (and
 *   {@link APITimeoutError}) when no answer came, {@link APIUserAbortError} when the caller aborted.
 * - The service answered, but: the operation failed there ({@link RemoteOperationError}), or the
 *   answer lacks what the protocol promises ({@link UnexpectedResponseError}).
 * - Settings: {@link ConfigError} (and {@link RecipeError}, {@link UsageError}, {@link ListenError}).
 * - Values handed to a function: {@link InputError} (and {@link ContextLengthError}).
 * - User code (workers, agents, trainers): {@link UserCodeError}, {@link RolloutError}.
 * - A run that cannot go on: {@link RunError}; the local engine: {@link EngineError}; a file
 *   that cannot be written: {@link StorageError}.
 * - `nexrl serve` answering a client: {@link ProtocolError}.
 *
 * Every class has one constructor shape, `new XError(message, options?)`, where `options` holds
 * the `cause` and the class's own details; `code` names the kind of error, and
 * `XError.isInstance(value)` recognises errors of another copy of the package too.
 *
 * @module
 */

import { isDerivedFrom, NEXRL_BRAND } from "./brand.js";

/** What every {@link NexrlError} constructor accepts after the message. */
export interface NexrlErrorOptions {
  /** The underlying error. */
  cause?: unknown;
  /** The kind of error (see {@link NexrlError.code}); classes with one kind set it themselves. */
  code?: string;
}

/**
 * Base class of every error nexrl throws on purpose. Catch `NexrlError` to tell our errors
 * (bad recipe, bad trajectory, bad loss inputs, …) from bugs and from errors of other libraries.
 */
export class NexrlError extends Error {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static readonly [NEXRL_BRAND]: string = "nexrl.NexrlError";
  /** The {@link NexrlError.code} of an error of this class constructed without one. */
  protected static readonly defaultCode: string = "error";

  /**
   * A stable string naming the kind of error, to branch on instead of the message:
   * `"disk_full"`, `"damaged_checkpoint"`, `"timeout"`, `"rate_limited"`, … Classes with several
   * kinds list theirs in the type of `code` (`RunError`'s is a {@link RunProblem}); the others
   * have one each (`ConfigError`'s is `"invalid_config"`).
   */
  readonly code: string;

  /**
   * @param message what was wrong and how to fix it.
   * @param options the cause, and the kind when the class has several.
   */
  constructor(message: string, options: NexrlErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? new.target.defaultCode;
  }

  /**
   * True when `value` is an error of this class or a subclass, thrown by this copy of nexrl or by
   * another (a user module importing another build, two installs), where `instanceof` says false:
   * the classes carry brands (`Symbol.for("nexrl.brand")`) that every copy shares.
   *
   * @example
   * ```ts
   * if (RunError.isInstance(error) && error.code === "locked") console.error(error.holder);
   * ```
   */
  static isInstance<T>(this: abstract new (...args: never[]) => T, value: unknown): value is T {
    if (value instanceof this) return true;
    return typeof value === "object" && value !== null && isDerivedFrom(value.constructor, this);
  }
}

// ---------------------------------------------------------------------------------------------
// Requests to services

/** What every {@link APIError} knows about the failed request. */
export interface APIErrorContext {
  /** HTTP method. */
  method: string;
  /** Full URL (API keys never appear in it). */
  url: string;
  /** The request headers as sent, with the API key header's value replaced by `***`. */
  requestHeaders?: Record<string, string>;
}

/** What an {@link APIError} with a status knows about the response. */
export interface APIStatusDetails extends APIErrorContext {
  /** HTTP status. */
  status: number;
  /** Parsed JSON body, or the text when it was not JSON (API key redacted). */
  body: unknown;
  /** Response headers, lower-cased names. */
  headers: Record<string, string>;
  /** The service's request id, when it gave one. */
  requestId?: string;
  /** Delay the service asked for (`retry-after-ms` / `retry-after`), in milliseconds. */
  retryAfterMs?: number;
  /** What to do about it, appended to the message. */
  hint: string;
}

/** What an {@link APIError} is constructed with: the request, the response when one arrived, and whether a retry may succeed. */
export interface APIErrorOptions extends APIErrorContext {
  /** The underlying error. */
  cause?: unknown;
  /** HTTP status; undefined when no response arrived. */
  status?: number;
  /** Parsed JSON body, or the text (API key redacted). */
  body?: unknown;
  /** Response headers, lower-cased names. */
  headers?: Record<string, string>;
  /** The service's request id, when it gave one. */
  requestId?: string;
  /** Delay the service asked for before a retry, in milliseconds. */
  retryAfterMs?: number;
  /** Whether sending the request again may succeed. */
  isRetryable: boolean;
}

/** Reads the service's own explanation out of an error body (`message`, `detail`, `error`, or the text). */
function serviceMessage(body: unknown): string {
  if (typeof body === "string") return body.trim().slice(0, 500);
  if (body && typeof body === "object") {
    const record = body as Record<string, unknown>;
    for (const key of ["message", "detail", "error"]) {
      const value = record[key];
      if (typeof value === "string" && value !== "") return value;
      // OpenAI's shape: `{ error: { message, type, code } }`.
      const nested = value && typeof value === "object" ? (value as { message?: unknown }).message : undefined;
      if (typeof nested === "string" && nested !== "") return nested;
      if (value !== undefined && value !== null) return JSON.stringify(value).slice(0, 500);
    }
    return JSON.stringify(body).slice(0, 500);
  }
  return "";
}

/** True when the status alone says a retry may succeed: 408, 429 and 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** Whether the service asked for a retry (`x-should-retry`, a boolean `retryable` body field), else by status. */
function retryable(details: APIStatusDetails): boolean {
  const shouldRetry = details.headers["x-should-retry"];
  if (shouldRetry === "true" || shouldRetry === "false") return shouldRetry === "true";
  const bodyRetryable =
    details.body && typeof details.body === "object" ? (details.body as Record<string, unknown>).retryable : undefined;
  return typeof bodyRetryable === "boolean" ? bodyRetryable : isRetryableStatus(details.status);
}

/**
 * A request to a service failed. With a response, `status` is set and the error is an instance of
 * the subclass for that status ({@link BadRequestError}, …, {@link InternalServerError}; other
 * statuses are `APIError` itself); without one it is an {@link APIConnectionError},
 * {@link APITimeoutError} or {@link APIUserAbortError}. Every service (Tinker, Weaver, inference)
 * throws these. `isRetryable` follows an `x-should-retry` header or a boolean `retryable` body
 * field when the service sends one, and otherwise the status (408, 429 and 5xx are retryable).
 * `code` names the status's class (`"bad_request"`, `"rate_limited"`, …; `"api_error"` for other
 * statuses).
 */
export class APIError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.APIError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "api_error";
  /** HTTP method of the failed request. */
  readonly method: string;
  /** URL of the failed request. */
  readonly url: string;
  /** Request headers as sent, API key redacted. */
  readonly requestHeaders: Record<string, string>;
  /** HTTP status of the response; undefined when no response arrived. */
  readonly status: number | undefined;
  /** The service's request id (`x-request-id` header or `request_id` body field), when it gave one. */
  readonly requestId: string | undefined;
  /** Whether sending the request again may succeed. */
  readonly isRetryable: boolean;
  /** Parsed JSON body, or the text (API key redacted); undefined without a response. */
  readonly body: unknown;
  /** Response headers, lower-cased names; empty without a response. */
  readonly headers: Record<string, string>;
  /** Delay the service asked for before a retry, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  /**
   * @param message what went wrong and what to do.
   * @param options the request, the response when one arrived, whether a retry may succeed, the cause.
   */
  constructor(message: string, options: APIErrorOptions) {
    super(message, { cause: options.cause });
    this.method = options.method;
    this.url = options.url;
    this.requestHeaders = options.requestHeaders ?? {};
    this.status = options.status;
    this.requestId = options.requestId;
    this.body = options.body;
    this.headers = options.headers ?? {};
    this.retryAfterMs = options.retryAfterMs;
    this.isRetryable = options.isRetryable;
  }

  /**
   * The error for an error status, of the subclass for that status.
   * @param details the request and its response, and a hint on what to do.
   */
  static fromStatus(details: APIStatusDetails): APIError {
    const Class = STATUS_CLASSES[details.status] ?? (details.status >= 500 ? InternalServerError : APIError);
    const said = serviceMessage(details.body);
    const id = details.requestId ? ` (request id ${details.requestId})` : "";
    return new Class(
      `${details.method} ${details.url} failed with HTTP ${details.status}${said ? `: ${said}` : ""}${id}. ${details.hint}`,
      { ...details, isRetryable: retryable(details) },
    );
  }
}

/** HTTP 400: the service rejected the request; code `"bad_request"`. */
export class BadRequestError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.BadRequestError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "bad_request";
}
/** HTTP 401: the API key is missing or wrong; code `"authentication"`. */
export class AuthenticationError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.AuthenticationError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "authentication";
}
/** HTTP 402: the account may not run more work until its billing is sorted out; code `"payment_required"`. */
export class PaymentRequiredError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.PaymentRequiredError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "payment_required";
}
/** HTTP 403: the API key may not do this; code `"permission_denied"`. */
export class PermissionDeniedError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.PermissionDeniedError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "permission_denied";
}
/** HTTP 404: no such resource (wrong id or path, or it expired); code `"not_found"`. */
export class NotFoundError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.NotFoundError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "not_found";
}
/** HTTP 409: the resource exists already or is in a conflicting state; code `"conflict"`. */
export class ConflictError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.ConflictError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "conflict";
}
/** HTTP 422: the body does not match the service's schema; code `"unprocessable_entity"`. */
export class UnprocessableEntityError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.UnprocessableEntityError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "unprocessable_entity";
}
/** HTTP 429: rate limited; retry after `retryAfterMs`; code `"rate_limited"`. */
export class RateLimitError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RateLimitError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "rate_limited";
}
/** HTTP 5xx: the service failed; code `"server_error"`. */
export class InternalServerError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.InternalServerError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "server_error";
}

const STATUS_CLASSES: Record<number, typeof APIError> = {
  400: BadRequestError,
  401: AuthenticationError,
  402: PaymentRequiredError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  422: UnprocessableEntityError,
  429: RateLimitError,
};

/** Why a connection could not be made, in words, for the causes that have a plain explanation. */
function connectFailure(url: string, cause: unknown): string | undefined {
  const error = cause as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const code = error?.code ?? error?.cause?.code;
  const { host, hostname } = new URL(url);
  if (code === "ECONNREFUSED") return `connection refused: nothing listens on ${host}`;
  if (code === "ENOTFOUND") return `the host name ${hostname} does not resolve`;
  return undefined;
}

/** What an {@link APIConnectionError} is constructed with. */
export interface APIConnectionErrorOptions extends APIErrorContext {
  /** The underlying socket error. */
  cause?: unknown;
  /** Whether a connection was made before the failure. */
  connected: boolean;
}

/**
 * No response arrived: the connection could not be made, or it broke before the answer
 * ({@link APITimeoutError} when the timeout passed); code `"connection_failed"`. `connected`
 * tells whether the request may have reached the service. Always retryable.
 * {@link APIConnectionError.fromCause} words the message from the socket error.
 */
export class APIConnectionError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.APIConnectionError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "connection_failed";

  /**
   * False when the connection was never made (refused, unresolvable host, connect timeout): the
   * service cannot have seen the request, so even a non-idempotent request may be sent again.
   */
  readonly connected: boolean;

  /**
   * @param message what failed and what to do.
   * @param options the request, whether a connection was made, the socket error.
   */
  constructor(message: string, options: APIConnectionErrorOptions) {
    super(message, { ...options, isRetryable: true });
    this.connected = options.connected;
  }

  /**
   * The error for a socket error, its message saying what happened in words.
   * @param context the request.
   * @param connected whether a connection was made before the failure.
   * @param cause the underlying socket error.
   */
  static fromCause(context: APIErrorContext, connected: boolean, cause: unknown): APIConnectionError {
    const what = cause instanceof Error ? cause.message : String(cause);
    return new APIConnectionError(
      connected
        ? `${context.method} ${context.url}: the connection broke before the service answered (${what}); the service may or may not have handled the request`
        : `${context.method} ${context.url}: could not connect (${connectFailure(context.url, cause) ?? what}); check the base URL and that the service is running`,
      { ...context, connected, cause },
    );
  }
}

/** What an {@link APITimeoutError} is constructed with. */
export interface APITimeoutErrorOptions extends APIErrorContext {
  /** The underlying error, if any. */
  cause?: unknown;
  /** The timeout that passed, in milliseconds. */
  timeoutMs: number;
}

/**
 * The service did not answer within the call's timeout; it may still handle the request. Code
 * `"timeout"`; {@link APITimeoutError.fromTimeout} words the message.
 */
export class APITimeoutError extends APIConnectionError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.APITimeoutError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "timeout";

  /** The timeout that passed, in milliseconds. */
  readonly timeoutMs: number;

  /**
   * @param message what timed out and what to do.
   * @param options the request and the timeout.
   */
  constructor(message: string, options: APITimeoutErrorOptions) {
    super(message, { ...options, connected: true });
    this.timeoutMs = options.timeoutMs;
  }

  /**
   * The error for a call that got no answer within `timeoutMs`.
   * @param context the request.
   * @param timeoutMs the timeout that passed.
   * @param hint what to do, after the default (`raise the timeout (timeoutMs) if the service is slow`).
   */
  static fromTimeout(
    context: APIErrorContext,
    timeoutMs: number,
    hint = "raise the timeout (timeoutMs) if the service is slow",
  ): APITimeoutError {
    return new APITimeoutError(`${context.method} ${context.url} got no answer within ${timeoutMs} ms; ${hint}`, {
      ...context,
      timeoutMs,
    });
  }
}

/** What an {@link APIUserAbortError} is constructed with. */
export interface APIUserAbortErrorOptions extends APIErrorContext {
  /** The signal's reason, when it is an error. */
  cause?: unknown;
}

/**
 * The caller aborted the request (its `AbortSignal`), or the client was closed; code
 * `"aborted"`, never retryable. {@link APIUserAbortError.fromReason} words the message.
 */
export class APIUserAbortError extends APIError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.APIUserAbortError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "aborted";

  /**
   * @param message what was aborted and why.
   * @param options the request.
   */
  constructor(message: string, options: APIUserAbortErrorOptions) {
    super(message, { ...options, isRetryable: false });
  }

  /**
   * The error for an aborted request.
   * @param context the request.
   * @param reason why, as the signal's reason says.
   */
  static fromReason(context: APIErrorContext, reason: string): APIUserAbortError {
    return new APIUserAbortError(`${context.method} ${context.url} was aborted: ${reason}`, context);
  }
}

/** The service that ran a {@link RemoteOperationError}'s operation. */
export type RemoteService = "tinker" | "weaver";

/**
 * Who a failed remote operation is attributed to: `user` means the request was wrong (fix the
 * inputs); `server` and `unknown` mean the service failed.
 */
export type RemoteErrorCategory = "user" | "server" | "unknown";

/** What a {@link RemoteOperationError} knows. */
export interface RemoteOperationDetails {
  /** The underlying error. */
  cause?: unknown;
  /** The service. */
  service: RemoteService;
  /** Who the failure is attributed to. */
  category: RemoteErrorCategory;
  /** The service's own error text (API key redacted). */
  serviceMessage: string;
  /** The service's error code (Weaver's `error_code`), when it gave one. */
  serviceCode?: string;
  /** The service's further details (Weaver's `error_details`), when given. */
  details?: unknown;
}

/**
 * The request was accepted but the operation failed on the service: Tinker's `retrieve_future`
 * answered `{error, category}`, a Weaver operation ended in state `error`, or the service kept
 * the account paused for billing longer than allowed. Code `"remote_operation_failed"`; the
 * service's own code is `serviceCode`.
 */
export class RemoteOperationError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RemoteOperationError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "remote_operation_failed";

  /** The service. */
  readonly service: RemoteService;
  /** Who the failure is attributed to. */
  readonly category: RemoteErrorCategory;
  /** The service's own error text. */
  readonly serviceMessage: string;
  /** The service's error code (Weaver's `error_code`), when it gave one. */
  readonly serviceCode: string | undefined;
  /** The service's further details, when given. */
  readonly details: unknown;

  /**
   * @param message what failed and what to do.
   * @param options the service's account of it, and the cause.
   */
  constructor(message: string, options: RemoteOperationDetails) {
    super(message, { cause: options.cause });
    this.service = options.service;
    this.category = options.category;
    this.serviceMessage = options.serviceMessage;
    this.serviceCode = options.serviceCode;
    this.details = options.details;
  }
}

/**
 * A service answered without what its protocol promises: a missing or malformed field, token ids
 * it did not report, a body that is not JSON. Usually a service of another version, or a server
 * that is not what the base URL was meant to point at. Code `"unexpected_response"`.
 */
export class UnexpectedResponseError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.UnexpectedResponseError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "unexpected_response";
}

// ---------------------------------------------------------------------------------------------
// Settings

/**
 * A setting cannot be used: a service or server option, a fault or flag specification, a missing
 * API key, an engine option or model configuration, a backend or mode the service does not offer,
 * an agent module or tokenizer that cannot be loaded. Names the setting and what to do. Code
 * `"invalid_config"`.
 */
export class ConfigError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.ConfigError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "invalid_config";
}

/** Why a server could not listen, for {@link ListenError}. */
export type ListenProblem = "address_in_use" | "permission_denied" | "bad_host" | "other";

/** What a {@link ListenError} is constructed with. */
export interface ListenErrorOptions {
  /** Why the server could not listen. */
  code: ListenProblem;
  /** The socket or resolver error. */
  cause?: unknown;
}

/** A server (`nexrl serve`, the agent gateway) could not listen on its host and port; `code` says why. */
export class ListenError extends ConfigError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.ListenError";
  /** Why the server could not listen. */
  declare readonly code: ListenProblem;

  /**
   * @param message what failed and what to do.
   * @param options why, and the socket or resolver error.
   */
  constructor(message: string, options: ListenErrorOptions) {
    super(message, options);
  }

  /**
   * The old name of {@link ListenError.code}.
   * @deprecated Use {@link ListenError.code}; `problem` goes in the next minor version.
   */
  get problem(): ListenProblem {
    return this.code;
  }
}

/**
 * The Redis server of `rollout_worker.distributed` (the queue between a run and its
 * `nexrl worker` processes) could not be reached, refused the credentials, or lost the
 * connection. The message names the server as `host:port`, never its password. Code
 * `"redis_unavailable"`.
 */
export class DistributedError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.DistributedError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "redis_unavailable";
}

/**
 * A command line the `nexrl` CLI cannot run: an unknown command or flag, a missing or bad value.
 * Code `"usage"`.
 */
export class UsageError extends ConfigError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.UsageError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "usage";
}

/** One problem found in a recipe. */
export interface RecipeIssue {
  /** Where in the recipe: `trainer.total_train_steps`, `data.data_files[0]`; `""` for the whole file. */
  readonly keyPath: string;
  /** What is wrong and what to do, complete (includes the expected shape and the suggestion). */
  readonly message: string;
  /** The composed file (`file:line`) or command-line override that set the key, when known. */
  readonly definedIn?: string;
  /** The expected shape, for type and value errors (`a positive integer`, `one of "sync", …`). */
  readonly expected?: string;
  /** The closest valid key or value, when one is close enough. */
  readonly suggestion?: string;
}

/** Why a user module named by a recipe could not be used, for {@link RecipeError.moduleFailure}. */
export type UserModuleFailure = "not_found" | "import_failed" | "missing_export" | "not_a_class" | "wrong_base";

/** The kinds of {@link RecipeError}: a user module that cannot be used, and why, or any other problem. */
export type RecipeProblem = "invalid_recipe" | UserModuleFailure;

/** Options of {@link RecipeError} and {@link RecipeError.fromIssues}. */
export interface RecipeErrorOptions {
  /** The recipe file being loaded (absolute path), when known. */
  file?: string;
  /** The underlying error (a YAML parser error, an exception thrown on import, …). */
  cause?: unknown;
  /** A {@link UserModuleFailure} when a user module named by the recipe could not be used; `"invalid_recipe"` (the default) otherwise. */
  code?: RecipeProblem;
  /** Every problem found; for the constructor, one issue at the top level with the message when left out. */
  issues?: readonly RecipeIssue[];
}

/** Formats one issue as a line of a {@link RecipeError} message. */
export function formatIssue(issue: RecipeIssue): string {
  const where = issue.keyPath === "" ? "(top level)" : issue.keyPath;
  const definedIn = issue.definedIn === undefined ? "" : ` (set in ${issue.definedIn})`;
  return `${where}: ${issue.message}${definedIn}`;
}

/**
 * A recipe could not be loaded: bad YAML, a composition or interpolation problem, keys that do
 * not match the schema, a missing file, or a user module (custom rollout worker, custom trainer,
 * evaluator) that cannot be used — missing, failing on import, lacking the export, not a class or
 * not extending the expected nexrl base class (`code` says which: a {@link UserModuleFailure}, or
 * `"invalid_recipe"` for every other problem). Lists every problem found in the same pass, one per
 * line, each with its key path.
 *
 * Construct it with {@link RecipeError.fromIssues}: a loader knows the problems, not the text, and
 * the factory words the message from them (heading, file, one line per issue), so every call site
 * names its issues and no two word a list differently. The constructor keeps the one shape of
 * nexrl's errors (`message, options`) for a message that is already worded.
 *
 * @example
 * ```text
 * Invalid recipe /home/me/recipe/local.yaml:
 *   - trainer.total_train_step: unknown key; did you mean `total_train_steps`? (set in /home/me/recipe/common.yaml:31)
 * ```
 */
export class RecipeError extends ConfigError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RecipeError";
  /** Why a user module could not be used, or `"invalid_recipe"` for other recipe problems. */
  declare readonly code: RecipeProblem;
  /** The recipe file being loaded, when known. */
  readonly file: string | undefined;
  /** Every problem found, in document order. */
  readonly issues: readonly RecipeIssue[];

  /**
   * @param message the whole message; {@link RecipeError.fromIssues} words it from the issues.
   * @param options the issues, the recipe file, the cause and the kind.
   */
  constructor(message: string, options: RecipeErrorOptions = {}) {
    super(message, { cause: options.cause, code: options.code ?? "invalid_recipe" });
    this.file = options.file;
    this.issues = options.issues ?? [{ keyPath: "", message }];
  }

  /**
   * The error for `issues`, its message a heading naming the file and one line per issue.
   * @param issues the problems (at least one).
   * @param options the recipe file, the cause and the kind.
   */
  static fromIssues(issues: readonly RecipeIssue[], options: Omit<RecipeErrorOptions, "issues"> = {}): RecipeError {
    const heading = options.file === undefined ? "Invalid recipe:" : `Invalid recipe ${options.file}:`;
    const lines = issues.map((issue) => `  - ${formatIssue(issue)}`);
    return new RecipeError([heading, ...lines].join("\n"), { ...options, issues });
  }

  /**
   * The old name of {@link RecipeError.code}.
   * @deprecated Use {@link RecipeError.code}; `moduleFailure` goes in the next minor version.
   */
  get moduleFailure(): UserModuleFailure | undefined {
    return this.code === "invalid_recipe" ? undefined : this.code;
  }
}

// ---------------------------------------------------------------------------------------------
// Values

/**
 * A value handed to nexrl cannot be used: a trajectory field (`field` names it), loss inputs,
 * token ids, sampling parameters, Adam parameters, a checkpoint name, a chat template, a data
 * file's rows, a binary array, or trajectories a trainer cannot turn into a training step. Code
 * `"invalid_input"`.
 */
export class InputError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.InputError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "invalid_input";
  /** The field or parameter at fault, when one is. */
  readonly field: string | undefined;

  /**
   * @param message what was wrong and how to fix it.
   * @param options the field at fault and the cause.
   */
  constructor(message: string, options: { field?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.field = options.field;
  }
}

/** What a {@link ContextLengthError} is constructed with. */
export interface ContextLengthErrorOptions {
  /** Which sequence ("datum 3", "prompt", …). */
  what: string;
  /** Its number of positions. */
  length: number;
  /** The model's context length. */
  contextLength: number;
  /** The underlying error, if any. */
  cause?: unknown;
}

/**
 * A sequence longer than the model's context window; code `"context_length_exceeded"`.
 * {@link ContextLengthError.fromLengths} words the message.
 */
export class ContextLengthError extends InputError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.ContextLengthError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "context_length_exceeded";
  /** Which sequence ("datum 3", "prompt", …). */
  readonly what: string;
  /** Its number of positions. */
  readonly length: number;
  /** The model's context length. */
  readonly contextLength: number;

  /**
   * @param message what is too long and how to fix it.
   * @param options the sequence and the lengths.
   */
  constructor(message: string, options: ContextLengthErrorOptions) {
    super(message, { cause: options.cause });
    this.what = options.what;
    this.length = options.length;
    this.contextLength = options.contextLength;
  }

  /**
   * The error for a sequence of `length` positions in a model of `contextLength`.
   * @param what which sequence ("datum 3", "prompt", …).
   * @param length its number of positions.
   * @param contextLength the model's context length.
   * @param hint how to fix it.
   */
  static fromLengths(what: string, length: number, contextLength: number, hint: string): ContextLengthError {
    return new ContextLengthError(
      `${what} has ${length} tokens but the model's context length is ${contextLength}; ${hint}`,
      { what, length, contextLength },
    );
  }
}

// ---------------------------------------------------------------------------------------------
// User code

/**
 * What user code did wrong, for {@link UserCodeError}: `uncaught` an exception nobody caught or a
 * rejection nobody handled; `timeout` a rollout that took longer than
 * `rollout_worker.rollout_timeout_seconds`; `hung` a rollout that can never finish (the process
 * had nothing left to do while its promise was unsettled; counted as a timeout); `agent_result`
 * an agent episode that cannot be scored or trained on (nothing gives it a reward, or no model
 * call of it was recorded).
 */
export type UserCodeProblem = "uncaught" | "timeout" | "hung" | "agent_result";

/**
 * User code (a worker, an agent, an evaluator, a trainer) failed in a way nexrl caught: inside a
 * rollout it fails that rollout (the failure policy applies); anywhere else it stops the run. The
 * original error, when there is one, is the `cause`; `code` says what went wrong.
 */
export class UserCodeError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.UserCodeError";
  /** What went wrong. */
  declare readonly code: UserCodeProblem;

  /**
   * @param message what happened and what to do.
   * @param options what went wrong, and the original error.
   */
  constructor(message: string, options: { code: UserCodeProblem; cause?: unknown }) {
    super(message, options);
  }

  /**
   * The old name of {@link UserCodeError.code}.
   * @deprecated Use {@link UserCodeError.code}; `problem` goes in the next minor version.
   */
  get problem(): UserCodeProblem {
    return this.code;
  }
}

/** Where a failed rollout came from, for {@link RolloutError}. */
export interface RolloutOrigin {
  /** Row index of the task in its dataset. */
  index: number;
  /** Group id shared by the copies of the task. */
  groupId: string;
  /** Index of the copy within its group. */
  runId: number;
  /** True for a validation rollout. */
  isVal: boolean;
}

/**
 * The judge failed: every attempt timed out, failed over HTTP or answered no usable score.
 * `reply` is the judge's last answer, when it gave one. Code `"judge_failed"`.
 */
export class JudgeError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.JudgeError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "judge_failed";
  /** The judge's last reply, if any (it is also quoted in the message). */
  readonly reply: string | undefined;

  /**
   * @param message what failed.
   * @param options the judge's last reply, and the cause.
   */
  constructor(message: string, options: { reply?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.reply = options.reply;
  }
}

/** What a {@link RolloutError} is constructed with. */
export interface RolloutErrorOptions {
  /** The rollout that failed. */
  origin: RolloutOrigin;
  /** Attempts made, the first included. */
  attempts: number;
  /** The last attempt's error. */
  cause?: unknown;
}

/**
 * A rollout failed and the failure policy stops the run (`stop_on_error` once retries are used
 * up). Names the task, the attempts made and the worker's error as `cause`. Code
 * `"rollout_failed"`.
 */
export class RolloutError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RolloutError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "rollout_failed";
  /** The rollout that failed. */
  readonly origin: RolloutOrigin;
  /** Attempts made, the first included. */
  readonly attempts: number;

  /**
   * @param message what happened and what to do.
   * @param options the rollout, the attempts and the last attempt's error.
   */
  constructor(message: string, options: RolloutErrorOptions) {
    super(message, { cause: options.cause });
    this.origin = options.origin;
    this.attempts = options.attempts;
  }
}

// ---------------------------------------------------------------------------------------------
// Runs

/** What a run folder's lock file says about the run holding it. */
export interface RunLockHolder {
  /** Process id. */
  pid: number;
  /** Host name of the machine it runs on. */
  host: string;
  /** When it took the lock (ISO 8601). */
  startedAt: string;
  /** Its command line. */
  command: string;
}

/** A setting that differs between a checkpoint and the recipe resuming it. */
export interface ChangedSetting {
  /** The recipe key. */
  key: string;
  /** Its value in the checkpoint's run. */
  before: string | undefined;
  /** Its value in the recipe. */
  after: string | undefined;
}

/**
 * Why a run cannot start or go on, for {@link RunError}: `setup` the recipe and the model
 * disagree or a checkpoint is missing, unreadable or from another run; `damaged_checkpoint` a
 * run-state file's checksum does not match its contents; `resume_settings` a resume
 * would change settings that decide the data order or the algorithm (`changed` lists them);
 * `output_dir` the run folder cannot be created or written; `locked` another live run holds it
 * (`holder`); `run_folder` a finished run's folder cannot be read; `stalled` the loop waits on a
 * promise that can never settle; `no_successful_rollout` a step had no successful rollout to
 * train on; `backend` the recipe asks for a backend this build cannot reach.
 */
export type RunProblem =
  | "setup"
  | "damaged_checkpoint"
  | "resume_settings"
  | "output_dir"
  | "locked"
  | "run_folder"
  | "stalled"
  | "no_successful_rollout"
  | "backend";

/** Options of {@link RunError}. */
export interface RunErrorOptions {
  /** Why the run cannot go on. */
  code: RunProblem;
  /** The underlying error. */
  cause?: unknown;
  /** For `locked`: the process holding the folder. */
  holder?: RunLockHolder;
  /** For `resume_settings`: the settings that differ and are not allowed to. */
  changed?: readonly ChangedSetting[];
}

/** A run cannot start, resume or go on; `code` says why, and the message names the key or file. */
export class RunError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RunError";
  /** Why the run cannot go on. */
  declare readonly code: RunProblem;
  /** For `locked`: the process holding the folder. */
  readonly holder: RunLockHolder | undefined;
  /** For `resume_settings`: the settings that differ and are not allowed to. */
  readonly changed: readonly ChangedSetting[];

  /**
   * @param message what happened and what to do.
   * @param options why, the cause and the problem's details.
   */
  constructor(message: string, options: RunErrorOptions) {
    super(message, options);
    this.holder = options.holder;
    this.changed = options.changed ?? [];
  }

  /**
   * The old name of {@link RunError.code}.
   * @deprecated Use {@link RunError.code}; `problem` goes in the next minor version.
   */
  get problem(): RunProblem {
    return this.code;
  }
}

// ---------------------------------------------------------------------------------------------
// The local engine

/** Why a state or snapshot file was refused. */
export type StateFileProblem =
  | "not_found"
  | "not_a_state_file"
  | "unsupported_version"
  | "truncated"
  | "corrupt"
  | "config_mismatch"
  | "missing_optimizer";

/**
 * What went wrong in the local engine, for {@link EngineError}: `closed` a call after `close()`;
 * `thread` a failure in a worker thread (`workerStack`); `non_finite_gradient` a gradient that is
 * not finite, so the optimizer step was refused; `non_finite_update` an optimizer step that would
 * make weights overflow (a learning rate far too large), refused too; `snapshot_exists` a sampler snapshot name that is
 * taken (snapshots are immutable); `state_file` a state or sampler-weights file that cannot be
 * loaded (`path`, `stateFileProblem`).
 */
export type EngineProblem =
  "closed" | "thread" | "non_finite_gradient" | "non_finite_update" | "snapshot_exists" | "state_file";

/** Options of {@link EngineError}. */
export interface EngineErrorOptions {
  /** What went wrong. */
  code: EngineProblem;
  /** The underlying error. */
  cause?: unknown;
  /** For `thread`: the stack trace inside the worker thread. */
  workerStack?: string;
  /** For `state_file`: the file. */
  path?: string;
  /** For `state_file`: the kind of problem. */
  stateFileProblem?: StateFileProblem;
}

/** The local engine cannot do what was asked; `code` says why. */
export class EngineError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.EngineError";
  /** What went wrong. */
  declare readonly code: EngineProblem;
  /** For `thread`: the stack trace inside the worker thread, when there was one. */
  readonly workerStack: string | undefined;
  /** For `state_file`: the file. */
  readonly path: string | undefined;
  /** For `state_file`: the kind of problem. */
  readonly stateFileProblem: StateFileProblem | undefined;

  /**
   * @param message what exactly and what to do.
   * @param options what went wrong, and its details.
   */
  constructor(message: string, options: EngineErrorOptions) {
    super(message, options);
    this.workerStack = options.workerStack;
    this.path = options.path;
    this.stateFileProblem = options.stateFileProblem;
  }

  /**
   * The old name of {@link EngineError.code}.
   * @deprecated Use {@link EngineError.code}; `problem` goes in the next minor version.
   */
  get problem(): EngineProblem {
    return this.code;
  }
}

// ---------------------------------------------------------------------------------------------
// Files

/** Why a file cannot be written, for {@link StorageError}. */
export type StorageProblem = "disk_full" | "quota" | "read_only" | "permission_denied";

/**
 * A file nexrl writes (a checkpoint, a sampler snapshot, a run state, a metrics or samples line,
 * an export) cannot be written: its disk is full, the quota is used up, the file system is
 * read-only or permission is denied. The message names the file and the way out; `cause` holds
 * the file system's own error; `code` says why.
 */
export class StorageError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.StorageError";
  /** Why the file cannot be written. */
  declare readonly code: StorageProblem;
  /** The file. */
  readonly path: string;

  /**
   * @param message what happened and what to do.
   * @param options why, the file and the file system's error.
   */
  constructor(message: string, options: { code: StorageProblem; path: string; cause?: unknown }) {
    super(message, options);
    this.path = options.path;
  }

  /**
   * The old name of {@link StorageError.code}.
   * @deprecated Use {@link StorageError.code}; `problem` goes in the next minor version.
   */
  get problem(): StorageProblem {
    return this.code;
  }
}

const STORAGE_PROBLEMS: Record<string, [StorageProblem, string, string]> = {
  ENOSPC: ["disk_full", "no space is left on its disk", "free space on that disk"],
  EDQUOT: ["quota", "the disk quota is used up", "free space within your quota"],
  EROFS: ["read_only", "its file system is read-only", "write to a folder on a writable disk"],
  EACCES: ["permission_denied", "permission denied", "make the folder writable for this user"],
  EPERM: ["permission_denied", "permission denied", "make the folder writable for this user"],
};

/**
 * The {@link StorageError} for a file system error met while writing `path`, or `error` itself
 * when it is not one of the "cannot write here" kinds (Node's own messages name no path for
 * `write`, and no way out).
 */
export function storageError(path: string, error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  const known = typeof code === "string" ? STORAGE_PROBLEMS[code] : undefined;
  if (!known || error instanceof NexrlError) return error;
  const [problem, what, wayOut] = known;
  return new StorageError(
    `cannot write ${path}: ${what} (${code}); ${wayOut}, or choose a folder elsewhere, and try again`,
    { code: problem, path, cause: error },
  );
}

// ---------------------------------------------------------------------------------------------
// Serving

/** The status and body of a {@link ProtocolError}'s answer: nexrl's own shape, or OpenAI's. */
export interface ProtocolErrorOptions {
  /** The HTTP status. */
  status: number;
  /** A short machine-readable code (`not_found`, `invalid_request`, …); OpenAI answers may go without (`code: null`). */
  code?: string;
  /** The underlying error. */
  cause?: unknown;
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** Answer as OpenAI does, `{ error: { message, type, param, code } }`, with this `type` (`invalid_request_error`, `server_error`, …). */
  openaiType?: string;
  /** For OpenAI answers: the request parameter at fault, if one is. */
  param?: string | null;
}

/**
 * An error `nexrl serve` (or the agent gateway) answers to its client with an HTTP status: a
 * `{error, message, retryable}` body, or OpenAI's `{ error: { message, type, param, code } }`
 * when `openaiType` is set. `code` is the body's code, `"protocol_error"` when it was given none.
 */
export class ProtocolError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.ProtocolError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "protocol_error";
  /** The HTTP status. */
  readonly status: number;
  /** The code of an OpenAI answer's body: `code` when one was given, else null. */
  readonly openaiCode: string | null;
  /** Extra response headers. */
  readonly headers: Record<string, string>;
  /** OpenAI's error type, for errors answered as OpenAI does. */
  readonly openaiType: string | undefined;
  /** For OpenAI answers: the request parameter at fault. */
  readonly param: string | null;

  /**
   * @param message what was wrong and how to fix it.
   * @param options the status, the code, extra headers, and the OpenAI body fields.
   */
  constructor(message: string, options: ProtocolErrorOptions) {
    super(message, options);
    this.status = options.status;
    this.openaiCode = options.code ?? null;
    this.headers = options.headers ?? {};
    this.openaiType = options.openaiType;
    this.param = options.param ?? null;
  }
}

// ---------------------------------------------------------------------------------------------
// Internal: thrown and caught inside nexrl, not exported from the package

/**
 * Thrown inside an operation of `nexrl serve` to fail it with a given category (who is to blame);
 * code `"operation_failed"`.
 */
export class OperationFailure extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.OperationFailure";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "operation_failed";
  /** Who is to blame. */
  readonly category: RemoteErrorCategory;

  /**
   * @param message what failed.
   * @param options who is to blame, and the cause.
   */
  constructor(message: string, options: { category: RemoteErrorCategory; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.category = options.category;
  }
}

/** Thrown inside a run's loop once it has been halted; code `"halted"`. */
export class Halted extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.Halted";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "halted";
}

/** A failed attempt that came back from a `nexrl worker`, for the driver's failure policy; code `"remote_rollout_failed"`. */
export class RemoteRolloutError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RemoteRolloutError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "remote_rollout_failed";
  /** Whether a retry could help (read by the failure policy's messages). */
  readonly isRetryable: boolean;

  /**
   * @param message the worker's error and the worker's name.
   * @param options whether a retry could help, as the worker reported.
   */
  constructor(message: string, options: { isRetryable: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.isRetryable = options.isRetryable;
  }
}

/** A call of a run's inference relay that failed, `isRetryable` as the driver's client said; code `"relay_call_failed"`. */
export class RelayCallError extends NexrlError {
  /** Brand recognised by `isInstance` across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RelayCallError";
  /** The `code` of every error of this class. */
  protected static override readonly defaultCode: string = "relay_call_failed";
  /** The relay's HTTP status. */
  readonly status: number;
  /** Whether the call may succeed when made again. */
  readonly isRetryable: boolean;

  /**
   * @param message what the relay answered.
   * @param options its status, and whether a retry may succeed.
   */
  constructor(message: string, options: { status: number; isRetryable: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.status = options.status;
    this.isRetryable = options.isRetryable;
  }
}
