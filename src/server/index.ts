/**
 * `nexrl serve`: the local engine behind the Tinker and Weaver training protocols and the
 * OpenAI-compatible inference endpoints, on one loopback HTTP server, with seeded fault
 * injection for testing clients.
 *
 * @module nexrl/server
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { apiKeyGate } from "./auth.js";
import { BrowserGuard } from "./browser-guard.js";
import { hostAddresses, isLoopback, listen } from "./bind.js";
import { FaultInjector, parseFaults, type FaultRates } from "./faults.js";
import { composeHandlers, type CapturedRequest, type RequestHandler } from "./handler.js";
import { healthHandler } from "./health.js";
import { defaultMemoryBudgetBytes, MemoryBudget, megabytes } from "./memory-budget.js";
import { ModelStore, type Unloaded } from "./models.js";
import { InFlightOperations } from "./operations.js";
import { createOpenAIModelsHandler } from "./openai-models.js";
import type { ServedModel as OpenAIServedModel } from "./openai.js";
import { DEFAULT_SESSION_TIMEOUT_SECONDS, SessionTable } from "./sessions.js";
import { createTinkerHandler } from "./tinker.js";
import { CheckpointArchives, TinkerCheckpoints } from "./tinker-checkpoints.js";
import { JwtIssuer, tinkerCredential } from "./tinker-jwt.js";
import { createWeaverHandler } from "./weaver.js";
import { ConfigError, type ListenProblem } from "../errors.js";

/** Which protocols a server speaks: one of them, or `all` three. */
export type ServeProtocol = "tinker" | "weaver" | "openai" | "all";

/** Options of {@link startServer}. */
export interface ServerOptions {
  /** Protocols to serve (default `all`). */
  protocol?: ServeProtocol;
  /** Interface to bind (default `127.0.0.1`: only this machine can connect). */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** Folder where models write their checkpoints and sampler snapshots. */
  outputDir: string;
  /** Share of requests answered with each fault, or a spec like `429:0.1,drop:0.05` (default none). */
  faults?: FaultRates | string;
  /** Seed of the fault stream and of models created without a seed (default 0). */
  seed?: number;
  /** Threads of each model's engine (default: the machine's available parallelism). */
  threads?: number;
  /**
   * When set, every request but the health checks must carry it, in any of `X-API-Key` (Tinker's
   * header), `X-WEAVER-API-KEY` (Weaver's) or `Authorization: Bearer` (OpenAI's); others get 401.
   */
  apiKey?: string;
  /**
   * Serve a non-loopback `host` without `apiKey` (default false: refused, since anyone who can
   * reach the port could train, sample and write files).
   */
  insecure?: boolean;
  /** What to do when listening fails, appended to the error (default: hints for the library options). */
  listenHint?: (problem: ListenProblem) => string;
  /**
   * Seconds after which a Tinker or Weaver session that sent no heartbeat (and no request for
   * its models) expires, unloading its models and sampling sessions (default 300: 30 of the
   * Tinker SDK's heartbeats, 10 of Weaver's); 0: sessions never expire.
   */
  sessionTimeoutSeconds?: number;
  /**
   * Most bytes the models and sampling sessions may reserve together, each engine counted at the
   * storage it allocates; a model over it is refused with 503 `memory_budget_exceeded` (default:
   * 75 % of the machine's memory, or of the container's limit); 0: no budget.
   */
  memoryBudgetBytes?: number;
  /** How long a Tinker `retrieve_future` poll is held before `try_again`, in ms (default 30 000). */
  longPollTimeoutMs?: number;
  /**
   * Extra flags answered by Tinker's `client/config` (e.g. `{ fwdbwd_max_chunk_len: 8 }`);
   * `pjwt_auth_enabled: true` also turns on the JWT exchange (`/api/v1/auth/token`) and requires
   * JWTs on every other call.
   */
  tinkerClientConfig?: Record<string, unknown>;
  /** Element type of logprobs in Tinker protobuf results: `float32` (default) or `bfloat16`. */
  tinkerResultDtype?: "float32" | "bfloat16";
  /** How long Tinker JWTs live, in seconds (default 3600). */
  tinkerJwtTtlSeconds?: number;
  /** Sees every parsed protocol request (tests check request bodies with it). */
  onRequest?: (request: CapturedRequest) => void;
  /** Receives warnings and unexpected server errors (default: standard error). */
  log?: (line: string) => void;
  /** More models for the OpenAI-compatible endpoints, by name (`nexrl serve --model` adds a run's weights). */
  openaiModels?: Readonly<Record<string, OpenAIServedModel>>;
  /**
   * Host names the `Host` header may give besides the bound address (and, on loopback,
   * `localhost`): a proxy's or a container's name. Others get 403, so that a web page cannot
   * point its own name at this machine and read the answers (DNS rebinding).
   */
  allowedHosts?: readonly string[];
  /**
   * Origins whose browser requests are served, with CORS headers (`*` for any); a browser's
   * cross-origin request from any other origin gets 403 (default: none allowed).
   */
  corsOrigins?: readonly string[];
}

/** Shortest API key that serving other machines takes without a warning. */
const MIN_EXPOSED_KEY_LENGTH = 16;

/** What an expired session freed, for the log: "unloaded 1 model (…) and 0 sampling sessions, freeing 116 MB". */
function describeUnloaded(unloaded: Unloaded): string {
  const list = (ids: string[], one: string): string =>
    `${ids.length} ${one}${ids.length === 1 ? "" : "s"}${ids.length > 0 ? ` (${ids.join(", ")})` : ""}`;
  return `unloaded ${list(unloaded.models, "model")} and ${list(unloaded.samplingSessions, "sampling session")}, freeing ${megabytes(unloaded.bytes)}`;
}

/** What to do when the library's `startServer` cannot listen. */
function defaultListenHint(problem: ListenProblem): string {
  switch (problem) {
    case "address_in_use":
      return "choose another port, or port 0 for a free one";
    case "permission_denied":
      return "use a port of 1024 or above";
    case "bad_host":
      return "give an address of this machine (127.0.0.1 by default) or a host name that resolves to one";
    case "other":
      return "check the host and port";
  }
}

/** A running server. */
export interface RunningServer {
  /** Its base URL, e.g. `http://127.0.0.1:8000`. */
  readonly url: string;
  /**
   * Stops accepting requests, closes every connection, and resolves once the operations already
   * received have run, so the files they write are complete, and the engines' host threads have
   * ended (idempotent).
   */
  close(): Promise<void>;
}

/**
 * Starts `nexrl serve` in this process: each created model is a local engine of a
 * `MODEL_PRESETS` shape, served over the Tinker protocol (`/api/v1/<endpoint>`, JSON and
 * protobuf generations, so the Tinker SDK from 0.18 to 0.25 works against it), the Weaver
 * protocol (`/api/v1/sessions`, `/models`, `/operations`, …) and the OpenAI-compatible
 * endpoints (`/v1/completions`, `/v1/chat/completions`, `/v1/models`: the presets by name, and
 * saved sampler snapshots by their `tinker://` / `weaver://` path) with Anthropic's
 * `/v1/messages` beside them, plus `/healthz` and `/health`. The engine is deterministic: the same requests give the same numbers.
 *
 * With `apiKey`, every route but the health checks answers 401 unless the request carries the
 * key (in `X-API-Key`, `X-WEAVER-API-KEY` or `Authorization: Bearer`). A `host` other machines
 * can reach is refused without a key unless `insecure`, and logs a warning either way.
 *
 * Web pages cannot drive it: a `Host` header other than the bound address (on loopback also
 * `localhost`) or `allowedHosts` gets 403 (DNS rebinding), so does a browser's cross-origin
 * request unless its origin is in `corsOrigins`, and a body that is not JSON or protobuf gets
 * 415 (the types a page may send without asking first).
 *
 * @throws {@link "nexrl".ConfigError | ConfigError} for an empty key or an unprotected non-loopback host;
 * {@link "nexrl/errors".ListenError | ListenError} when the port is taken or privileged, or the host is not this machine's.
 *
 * @example
 * ```ts
 * const server = await startServer({ outputDir: "/tmp/serve", faults: "429:0.1,drop:0.05", seed: 1 });
 * const service = createTrainingService("tinker", { baseUrl: server.url, apiKey: "tml-local" });
 * // … train …
 * await server.close();
 * ```
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const protocol = options.protocol ?? "all";
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 0;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const hint = options.listenHint ?? defaultListenHint;
  const apiKey = options.apiKey;
  if (apiKey !== undefined && apiKey.trim() === "")
    throw new ConfigError("the API key is empty; give a non-empty key, or none to serve on loopback only");
  const addresses = await hostAddresses(host, hint);
  const exposed = !addresses.every(isLoopback);
  if (exposed && apiKey === undefined && !options.insecure)
    throw new ConfigError(
      `refusing to serve on ${host} without an API key: other machines could reach it and train, sample and write files; ` +
        "give an API key (--api-key KEY or NEXRL_SERVE_API_KEY), bind 127.0.0.1, or pass --insecure to serve without a key",
    );
  const seed = options.seed ?? 0;
  const timeoutSeconds = options.sessionTimeoutSeconds ?? DEFAULT_SESSION_TIMEOUT_SECONDS;
  if (!(Number.isFinite(timeoutSeconds) && timeoutSeconds >= 0))
    throw new ConfigError(
      `the session timeout must be a number of seconds >= 0 (0: sessions never expire), got ${timeoutSeconds}`,
    );
  const budgetBytes = options.memoryBudgetBytes ?? defaultMemoryBudgetBytes();
  if (!(Number.isFinite(budgetBytes) && budgetBytes >= 0))
    throw new ConfigError(`the memory budget must be a number of bytes >= 0 (0: no budget), got ${budgetBytes}`);
  const budget = new MemoryBudget(
    budgetBytes > 0 ? budgetBytes : undefined,
    "unload the models you no longer use (Tinker unload_model, Weaver terminate)" +
      (timeoutSeconds > 0 ? `, wait for abandoned sessions to expire (${timeoutSeconds} s without a heartbeat)` : "") +
      ", or give the server a larger budget (nexrl serve --memory-budget MB)",
  );
  const store = new ModelStore({ outputDir: options.outputDir, seed, budget, threads: options.threads, log });
  const sessions = new SessionTable({ timeoutSeconds, busy: (id) => store.busy(id) });
  sessions.onExpire((id) =>
    log(
      `nexrl serve: session ${id} ${sessions.expiry}; ${describeUnloaded(store.unloadOwner(id, { code: "session_expired", reason: `its session ${id} ${sessions.expiry} (nexrl serve --session-timeout)` }))}`,
    ),
  );
  const faults = new FaultInjector(
    typeof options.faults === "string" ? parseFaults(options.faults) : (options.faults ?? {}),
    seed,
  );
  const inFlight = new InFlightOperations();
  const shared = { store, sessions, faults, capture: options.onRequest, inFlight };
  const tinker = protocol === "tinker" || protocol === "all";
  // Tinker clients trade the key for JWTs when the flag is on; the gate accepts those JWTs too.
  const jwt =
    tinker && options.tinkerClientConfig?.["pjwt_auth_enabled"] === true
      ? new JwtIssuer(options.tinkerJwtTtlSeconds ?? 3600)
      : undefined;
  const guard = new BrowserGuard({
    boundHost: host,
    boundAddresses: addresses,
    allowedHosts: options.allowedHosts,
    corsOrigins: options.corsOrigins,
    server: "nexrl serve",
  });
  // Web pages are kept out first; then health checks stay open and every other route needs the key when one is set.
  const archives = tinker ? new CheckpointArchives(store) : undefined;
  // Archive downloads are signed URLs, open without the key like Tinker's storage URLs.
  const handlers: RequestHandler[] = [async (req, res) => guard.check(req, res), healthHandler];
  if (archives) handlers.push(archives.handler);
  if (apiKey !== undefined)
    handlers.push(apiKeyGate(apiKey, jwt && ((req) => jwt.verify(tinkerCredential(req)) === "valid")));
  if (tinker) {
    handlers.push(
      createTinkerHandler({
        ...shared,
        longPollTimeoutMs: options.longPollTimeoutMs ?? 30_000,
        clientConfig: options.tinkerClientConfig,
        resultDtype: options.tinkerResultDtype,
        jwt,
        checkpoints: new TinkerCheckpoints(store, archives!),
      }),
    );
  }
  if (protocol === "weaver" || protocol === "all") handlers.push(createWeaverHandler(shared));
  const openai =
    protocol === "openai" || protocol === "all"
      ? await createOpenAIModelsHandler(store, log, options.openaiModels)
      : undefined;
  if (openai) handlers.push(openai.handler);
  const server: Server = createServer(composeHandlers(handlers, log));
  await listen(server, port, host, hint);
  if (exposed)
    log(
      apiKey === undefined
        ? `warning: nexrl serve listens on ${host} without an API key (--insecure): anyone who can reach this port can use it`
        : `warning: nexrl serve listens on ${host}, reachable from other machines; the API key travels unencrypted over HTTP, so use a TLS proxy on untrusted networks`,
    );
  if (exposed && apiKey !== undefined && apiKey.length < MIN_EXPOSED_KEY_LENGTH)
    log(
      `warning: the API key is ${apiKey.length} character${apiKey.length === 1 ? "" : "s"} long, which anyone who can reach ${host} could guess; use at least ${MIN_EXPOSED_KEY_LENGTH} random characters (openssl rand -hex 16 makes 32)`,
    );
  const address = server.address() as AddressInfo;
  const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${shown}:${address.port}`,
    close: () =>
      (closed ??= new Promise<void>((resolve, reject) => {
        sessions.close();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      })
        .then(() => inFlight.settled())
        .then(() => Promise.all([store.close(), openai?.close()]))
        .then(() => undefined)),
  };
}

export { parseFaults, type FaultKind, type FaultRates } from "./faults.js";
export { API_KEY_HEADERS } from "./auth.js";
export type { CapturedRequest, RequestHandler } from "./handler.js";
export {
  createOpenAIHandler,
  type ServedModel,
  type OpenAIHandlerOptions,
  type OpenAIRequestHandler,
} from "./openai.js";
