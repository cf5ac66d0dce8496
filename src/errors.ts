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
 * @module
 */

/**
 * Base class of every error nexrl throws on purpose. Catch `NexrlError` to tell our errors
 * (bad recipe, bad trajectory, bad loss inputs, …) from bugs and from errors of other libraries.
 */
export class NexrlError extends Error {
  /** @param message what was wrong and how to fix it. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
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
 */
export class APIError extends NexrlError {
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
   * @param context the request, and the response when one arrived.
   * @param isRetryable whether a retry may succeed, for errors without a response.
   */
  constructor(
    message: string,
    context: APIErrorContext & Partial<APIStatusDetails>,
    isRetryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.method = context.method;
    this.url = context.url;
    this.requestHeaders = context.requestHeaders ?? {};
    this.status = context.status;
    this.requestId = context.requestId;
    this.body = context.body;
    this.headers = context.headers ?? {};
    this.retryAfterMs = context.retryAfterMs;
    this.isRetryable = isRetryable;
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
      details,
      retryable(details),
    );
  }
}

/** HTTP 400: the service rejected the request. */
export class BadRequestError extends APIError {}
/** HTTP 401: the API key is missing or wrong. */
export class AuthenticationError extends APIError {}
/** HTTP 402: the account may not run more work until its billing is sorted out. */
export class PaymentRequiredError extends APIError {}
/** HTTP 403: the API key may not do this. */
export class PermissionDeniedError extends APIError {}
/** HTTP 404: no such resource (wrong id or path, or it expired). */
export class NotFoundError extends APIError {}
/** HTTP 409: the resource exists already or is in a conflicting state. */
export class ConflictError extends APIError {}
/** HTTP 422: the body does not match the service's schema. */
export class UnprocessableEntityError extends APIError {}
/** HTTP 429: rate limited; retry after `retryAfterMs`. */
export class RateLimitError extends APIError {}
/** HTTP 5xx: the service failed. */
export class InternalServerError extends APIError {}

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

/**
 * No response arrived: the connection could not be made, or it broke before the answer
 * ({@link APITimeoutError} when the timeout passed). `connected` tells whether the request may
 * have reached the service.
 */
export class APIConnectionError extends APIError {
  /**
   * False when the connection was never made (refused, unresolvable host, connect timeout): the
   * service cannot have seen the request, so even a non-idempotent request may be sent again.
   */
  readonly connected: boolean;

  /**
   * @param context the request.
   * @param connected whether a connection was made before the failure.
   * @param cause the underlying socket error.
   * @param message replaces the default message (for subclasses).
   */
  constructor(context: APIErrorContext, connected: boolean, cause: unknown, message?: string) {
    const what = cause instanceof Error ? cause.message : String(cause);
    super(
      message ??
        (connected
          ? `${context.method} ${context.url}: the connection broke before the service answered (${what}); the service may or may not have handled the request`
          : `${context.method} ${context.url}: could not connect (${connectFailure(context.url, cause) ?? what}); check the base URL and that the service is running`),
      context,
      true,
      cause === undefined ? undefined : { cause },
    );
    this.connected = connected;
  }
}

/** The service did not answer within the call's timeout; it may still handle the request. */
export class APITimeoutError extends APIConnectionError {
  /** The timeout that passed, in milliseconds. */
  readonly timeoutMs: number;

  /**
   * @param context the request.
   * @param timeoutMs the timeout that passed.
   * @param hint what to do, after the default (`raise the timeout (timeoutMs) if the service is slow`).
   */
  constructor(
    context: APIErrorContext,
    timeoutMs: number,
    hint = "raise the timeout (timeoutMs) if the service is slow",
  ) {
    super(context, true, undefined, `${context.method} ${context.url} got no answer within ${timeoutMs} ms; ${hint}`);
    this.timeoutMs = timeoutMs;
  }
}

/** The caller aborted the request (its `AbortSignal`), or the client was closed. */
export class APIUserAbortError extends APIError {
  /**
   * @param context the request.
   * @param reason why, as the signal's reason says.
   */
  constructor(context: APIErrorContext, reason: string) {
    super(`${context.method} ${context.url} was aborted: ${reason}`, context, false);
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
  /** The service. */
  service: RemoteService;
  /** Who the failure is attributed to. */
  category: RemoteErrorCategory;
  /** The service's own error text (API key redacted). */
  serviceMessage: string;
  /** The service's error code (Weaver's `error_code`), when it gave one. */
  code?: string;
  /** The service's further details (Weaver's `error_details`), when given. */
  details?: unknown;
}

/**
 * The request was accepted but the operation failed on the service: Tinker's `retrieve_future`
 * answered `{error, category}`, a Weaver operation ended in state `error`, or the service kept
 * the account paused for billing longer than allowed.
 */
export class RemoteOperationError extends NexrlError {
  /** The service. */
  readonly service: RemoteService;
  /** Who the failure is attributed to. */
  readonly category: RemoteErrorCategory;
  /** The service's own error text. */
  readonly serviceMessage: string;
  /** The service's error code, when it gave one. */
  readonly code: string | undefined;
  /** The service's further details, when given. */
  readonly details: unknown;

  /**
   * @param message what failed and what to do.
   * @param details the service's account of it.
   */
  constructor(message: string, details: RemoteOperationDetails, options?: { cause?: unknown }) {
    super(message, options);
    this.service = details.service;
    this.category = details.category;
    this.serviceMessage = details.serviceMessage;
    this.code = details.code;
    this.details = details.details;
  }
}

/**
 * A service answered without what its protocol promises: a missing or malformed field, token ids
 * it did not report, a body that is not JSON. Usually a service of another version, or a server
 * that is not what the base URL was meant to point at.
 */
export class UnexpectedResponseError extends NexrlError {}

// ---------------------------------------------------------------------------------------------
// Settings

/**
 * A setting cannot be used: a service or server option, a fault or flag specification, a missing
 * API key, an engine option or model configuration, a backend or mode the service does not offer,
 * an agent module or tokenizer that cannot be loaded. Names the setting and what to do.
 */
export class ConfigError extends NexrlError {}

/** Why a server could not listen, for {@link ListenError}. */
export type ListenProblem = "address_in_use" | "permission_denied" | "bad_host" | "other";

/** A server (`nexrl serve`, the agent gateway) could not listen on its host and port; `problem` says why. */
export class ListenError extends ConfigError {
  /**
   * @param problem the kind of failure.
   * @param message what failed and what to do.
   * @param cause the socket or resolver error.
   */
  constructor(
    readonly problem: ListenProblem,
    message: string,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

/**
 * The Redis server of `rollout_worker.distributed` (the queue between a run and its
 * `nexrl worker` processes) could not be reached, refused the credentials, or lost the
 * connection. The message names the server as `host:port`, never its password.
 */
export class DistributedError extends NexrlError {}

/** A command line the `nexrl` CLI cannot run: an unknown command or flag, a missing or bad value. */
export class UsageError extends ConfigError {}

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

/** Options of {@link RecipeError}. */
export interface RecipeErrorOptions {
  /** The recipe file being loaded (absolute path), when known. */
  file?: string;
  /** The underlying error (a YAML parser error, an exception thrown on import, …). */
  cause?: unknown;
  /** Set when a user module named by the recipe could not be used, and why. */
  moduleFailure?: UserModuleFailure;
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
 * not extending the expected nexrl base class (`moduleFailure` says which). Lists every problem
 * found in the same pass, one per line, each with its key path.
 *
 * @example
 * ```text
 * Invalid recipe /home/me/recipe/local.yaml:
 *   - trainer.total_train_step: unknown key; did you mean `total_train_steps`? (set in /home/me/recipe/common.yaml:31)
 * ```
 */
export class RecipeError extends ConfigError {
  /** The recipe file being loaded, when known. */
  readonly file: string | undefined;
  /** Every problem found, in document order. */
  readonly issues: readonly RecipeIssue[];
  /** Why a user module could not be used; undefined for other recipe problems. */
  readonly moduleFailure: UserModuleFailure | undefined;

  /**
   * @param issues the problems (at least one).
   * @param options the recipe file, the cause and the user-module failure.
   */
  constructor(issues: readonly RecipeIssue[], options: RecipeErrorOptions = {}) {
    const heading = options.file === undefined ? "Invalid recipe:" : `Invalid recipe ${options.file}:`;
    const lines = issues.map((issue) => `  - ${formatIssue(issue)}`);
    super([heading, ...lines].join("\n"), options.cause === undefined ? undefined : { cause: options.cause });
    this.file = options.file;
    this.issues = issues;
    this.moduleFailure = options.moduleFailure;
  }
}

// ---------------------------------------------------------------------------------------------
// Values

/**
 * A value handed to nexrl cannot be used: a trajectory field (`field` names it), loss inputs,
 * token ids, sampling parameters, Adam parameters, a checkpoint name, a chat template, a data
 * file's rows, a binary array, or trajectories a trainer cannot turn into a training step.
 */
export class InputError extends NexrlError {
  /** The field or parameter at fault, when one is. */
  readonly field: string | undefined;

  /**
   * @param message what was wrong and how to fix it.
   * @param options the field at fault and the cause.
   */
  constructor(message: string, options: { field?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.field = options.field;
  }
}

/** A sequence longer than the model's context window. */
export class ContextLengthError extends InputError {
  /**
   * @param what which sequence ("datum 3", "prompt", …).
   * @param length its number of positions.
   * @param contextLength the model's context length.
   * @param hint how to fix it.
   */
  constructor(
    readonly what: string,
    readonly length: number,
    readonly contextLength: number,
    hint: string,
  ) {
    super(`${what} has ${length} tokens but the model's context length is ${contextLength}; ${hint}`);
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
 * original error, when there is one, is the `cause`.
 */
export class UserCodeError extends NexrlError {
  /**
   * @param problem what went wrong.
   * @param message what happened and what to do.
   */
  constructor(
    readonly problem: UserCodeProblem,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
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
 * `reply` is the judge's last answer, when it gave one.
 */
export class JudgeError extends NexrlError {
  /** The judge's last reply, if any (it is also quoted in the message). */
  readonly reply: string | undefined;

  /** @param message what failed; @param reply the judge's last reply. */
  constructor(message: string, reply?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reply = reply;
  }
}

/**
 * A rollout failed and the failure policy stops the run (`stop_on_error` once retries are used
 * up). Names the task, the attempts made and the worker's error as `cause`.
 */
export class RolloutError extends NexrlError {
  /**
   * @param origin the rollout that failed.
   * @param attempts attempts made, the first included.
   * @param message what happened and what to do.
   * @param cause the last attempt's error.
   */
  constructor(
    readonly origin: RolloutOrigin,
    readonly attempts: number,
    message: string,
    cause: unknown,
  ) {
    super(message, { cause });
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
  /** The underlying error. */
  cause?: unknown;
  /** For `locked`: the process holding the folder. */
  holder?: RunLockHolder;
  /** For `resume_settings`: the settings that differ and are not allowed to. */
  changed?: readonly ChangedSetting[];
}

/** A run cannot start, resume or go on; `problem` says why, and the message names the key or file. */
export class RunError extends NexrlError {
  /** For `locked`: the process holding the folder. */
  readonly holder: RunLockHolder | undefined;
  /** For `resume_settings`: the settings that differ and are not allowed to. */
  readonly changed: readonly ChangedSetting[];

  /**
   * @param problem why the run cannot go on.
   * @param message what happened and what to do.
   * @param options the cause and the problem's details.
   */
  constructor(
    readonly problem: RunProblem,
    message: string,
    options: RunErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.holder = options.holder;
    this.changed = options.changed ?? [];
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
  /** For `thread`: the stack trace inside the worker thread. */
  workerStack?: string;
  /** For `state_file`: the file. */
  path?: string;
  /** For `state_file`: the kind of problem. */
  stateFileProblem?: StateFileProblem;
}

/** The local engine cannot do what was asked; `problem` says why. */
export class EngineError extends NexrlError {
  /** For `thread`: the stack trace inside the worker thread, when there was one. */
  readonly workerStack: string | undefined;
  /** For `state_file`: the file. */
  readonly path: string | undefined;
  /** For `state_file`: the kind of problem. */
  readonly stateFileProblem: StateFileProblem | undefined;

  /**
   * @param problem what went wrong.
   * @param message what exactly and what to do.
   * @param options the problem's details.
   */
  constructor(
    readonly problem: EngineProblem,
    message: string,
    options: EngineErrorOptions = {},
  ) {
    super(message);
    this.workerStack = options.workerStack;
    this.path = options.path;
    this.stateFileProblem = options.stateFileProblem;
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
 * the file system's own error.
 */
export class StorageError extends NexrlError {
  /**
   * @param problem why the file cannot be written.
   * @param path the file.
   * @param message what happened and what to do.
   * @param options the file system's error.
   */
  constructor(
    readonly problem: StorageProblem,
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
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
    problem,
    path,
    `cannot write ${path}: ${what} (${code}); ${wayOut}, or choose a folder elsewhere, and try again`,
    { cause: error },
  );
}

// ---------------------------------------------------------------------------------------------
// Serving

/** The body shape an error is answered in by {@link ProtocolError}: nexrl's own, or OpenAI's. */
export interface ProtocolErrorOptions {
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
 * when `openaiType` is set.
 */
export class ProtocolError extends NexrlError {
  /** Extra response headers. */
  readonly headers: Record<string, string>;
  /** OpenAI's error type, for errors answered as OpenAI does. */
  readonly openaiType: string | undefined;
  /** For OpenAI answers: the request parameter at fault. */
  readonly param: string | null;

  /**
   * @param status the HTTP status.
   * @param code a short machine-readable code (`not_found`, `invalid_request`, …), or null.
   * @param message what was wrong and how to fix it.
   * @param options extra headers, and the OpenAI body fields.
   */
  constructor(
    readonly status: number,
    readonly code: string | null,
    message: string,
    options: ProtocolErrorOptions = {},
  ) {
    super(message);
    this.headers = options.headers ?? {};
    this.openaiType = options.openaiType;
    this.param = options.param ?? null;
  }
}
