/**
 * `nexrl serve`: the local engine behind the Tinker and Weaver training protocols and the
 * OpenAI-compatible inference endpoints, on one loopback HTTP server, with seeded fault
 * injection for testing clients.
 *
 * @module
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { FaultInjector, parseFaults, type FaultRates } from "./faults.js";
import { composeHandlers, type CapturedRequest, type RequestHandler } from "./handler.js";
import { healthHandler } from "./health.js";
import { ModelStore } from "./models.js";
import { createOpenAIModelsHandler } from "./openai-models.js";
import { createTinkerHandler } from "./tinker.js";
import { createWeaverHandler } from "./weaver.js";

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
  /** When set, clients must send it (`X-API-Key` for Tinker, `X-WEAVER-API-KEY` for Weaver). */
  apiKey?: string;
  /** How long a Tinker `retrieve_future` poll is held before `try_again`, in ms (default 30 000). */
  longPollTimeoutMs?: number;
  /** Extra flags answered by Tinker's `client/config` (e.g. `{ fwdbwd_max_chunk_len: 8 }`). */
  tinkerClientConfig?: Record<string, unknown>;
  /** Sees every parsed protocol request (tests check request bodies with it). */
  onRequest?: (request: CapturedRequest) => void;
  /** Receives unexpected server errors (default: standard error). */
  log?: (line: string) => void;
}

/** A running server. */
export interface RunningServer {
  /** Its base URL, e.g. `http://127.0.0.1:8000`. */
  readonly url: string;
  /** Stops accepting requests and closes every connection (idempotent). */
  close(): Promise<void>;
}

/**
 * Starts `nexrl serve` in this process: each created model is a local engine of a
 * `MODEL_PRESETS` shape, served over the Tinker protocol (`/api/v1/<endpoint>`), the Weaver
 * protocol (`/api/v1/sessions`, `/models`, `/operations`, …) and the OpenAI-compatible
 * endpoints (`/v1/completions`, `/v1/chat/completions`, `/v1/models`: the presets by name, and
 * saved sampler snapshots by their `tinker://` / `weaver://` path), plus `/healthz` and
 * `/health`. The engine is deterministic: the same requests give the same numbers.
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
  const seed = options.seed ?? 0;
  const store = new ModelStore(options.outputDir, seed, options.threads);
  const faults = new FaultInjector(
    typeof options.faults === "string" ? parseFaults(options.faults) : (options.faults ?? {}),
    seed,
  );
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const shared = { store, faults, apiKey: options.apiKey, capture: options.onRequest };
  const handlers: RequestHandler[] = [healthHandler];
  if (protocol === "tinker" || protocol === "all") {
    handlers.push(
      createTinkerHandler({
        ...shared,
        longPollTimeoutMs: options.longPollTimeoutMs ?? 30_000,
        clientConfig: options.tinkerClientConfig,
      }),
    );
  }
  if (protocol === "weaver" || protocol === "all") handlers.push(createWeaverHandler(shared));
  if (protocol === "openai" || protocol === "all") handlers.push(await createOpenAIModelsHandler(store, log));
  const server: Server = createServer(composeHandlers(handlers, log));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      (closed ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      })),
  };
}

export { FaultSpecError, parseFaults, type FaultKind, type FaultRates } from "./faults.js";
export type { CapturedRequest, RequestHandler } from "./handler.js";
