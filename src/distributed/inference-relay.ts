/**
 * The driver's sampler over HTTP for `nexrl worker` processes: {@link InferenceRelay} serves the
 * run's {@link InferenceClient} (`POST /inference`, a bearer token per driver session), and
 * {@link RelayInferenceClient} is that client on the worker's side. The worker's rollouts wrap
 * it as they wrap the run's client in process (seeds, defaults), so a rollout samples the same
 * tokens wherever it runs; agents reach it through their own gateway as in process.
 * @module
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { listen } from "../server/bind.js";
import { readBody } from "../server/io.js";
import type { InferenceClient, InferenceOptions, InferenceResult } from "../contracts/inference.js";
import type { ChatMessage, Tokenizer } from "../wire/tokenizer.js";
import { decode, encode, type InferenceTarget } from "./messages.js";
import { HttpTransport } from "../http/transport.js";
import { APIError, RelayCallError } from "../errors.js";

/** The content type of the relay's answers. */
const RELAY_CONTENT_TYPE = "text/plain; charset=utf-8";

/** The longest timer Node keeps (about 24 days): the relay client's calls end with their rollout instead. */
const NO_TIMEOUT_MS = 2 ** 31 - 1;

/** A call of the relay: what {@link InferenceClient} takes, but the abort signal. */
type RelayCall =
  | { kind: "completion"; prompt: string | number[]; options: Omit<InferenceOptions, "signal"> }
  | { kind: "chat"; messages: ChatMessage[]; options: Omit<InferenceOptions, "signal"> };

/** What a failed call answers. */
interface RelayFailure {
  error: string;
  message: string;
  retryable: boolean;
}

/** Serves the run's inference client to the workers. */
export class InferenceRelay {
  private constructor(
    private readonly server: Server,
    /** Where workers reach it, and its token. */
    readonly target: InferenceTarget,
  ) {}

  /**
   * Listens on `host`:`port` (0: a free port); workers are told `publicHost` (default `host`).
   * @throws {@link ListenError} when it cannot listen.
   */
  static async start(
    inference: InferenceClient,
    settings: { host: string; port: number; public_host?: string | undefined },
  ): Promise<InferenceRelay> {
    const token = randomBytes(24).toString("base64url");
    const expected = Buffer.from(`Bearer ${token}`);
    const server = createServer((req, res) => {
      void answer(inference, expected, req, res);
    });
    await listen(
      server,
      settings.port,
      settings.host,
      () => "set rollout_worker.distributed.inference.host and .port to an address and free port of this machine",
    );
    server.unref();
    const { port } = server.address() as AddressInfo;
    const host = settings.public_host ?? settings.host;
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
    return new InferenceRelay(server, { url, token });
  }

  /** Stops listening and ends the connections. */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Answers one request of the relay. */
async function answer(
  inference: InferenceClient,
  expected: Buffer,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const send = (status: number, body: unknown): void => {
    const text = encode(body);
    // Not a JSON content type: the body is JSON with tagged non-finite numbers, which the
    // worker's client decodes itself (its transport would parse JSON as plain JSON).
    res.writeHead(status, { "content-type": RELAY_CONTENT_TYPE, "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const fail = (status: number, error: string, message: string, retryable: boolean): void =>
    send(status, { error, message, retryable } satisfies RelayFailure);
  const auth = Buffer.from(req.headers.authorization ?? "");
  if (auth.length !== expected.length || !timingSafeEqual(auth, expected))
    return fail(401, "unauthorized", "this is a nexrl run's inference relay: only its workers may call it", false);
  if (req.method !== "POST" || req.url !== "/inference")
    return fail(404, "not_found", "the relay answers POST /inference only", false);
  // The worker gave the call up (its rollout ended): so does the relay. A response sent closes
  // too, and aborting then would only cost an error object.
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  try {
    const call = decode<RelayCall>((await readBody(req)).toString("utf8"));
    const options = { ...call.options, signal: controller.signal };
    const result =
      call.kind === "chat"
        ? await inference.chat(call.messages, options)
        : await inference.completion(call.prompt, options);
    send(200, result);
  } catch (error) {
    const e = error as { name?: string; message?: string; isRetryable?: boolean };
    fail(500, e.name ?? "Error", e.message ?? String(error), e.isRetryable ?? true);
  }
}

/**
 * The driver's inference client, called over the relay from a worker: keep-alive connections of
 * the project's {@link HttpTransport}, no retries (the rollout's own policy decides), and no
 * timeout of its own (the rollout's timeout ends a call, through its signal).
 */
export class RelayInferenceClient implements InferenceClient {
  private readonly http: HttpTransport;

  /** @param target the relay the task names. @param tokenizer the trained model's (loaded from the recipe). */
  constructor(
    target: InferenceTarget,
    readonly tokenizer: Tokenizer,
  ) {
    this.http = new HttpTransport({
      baseUrl: target.url,
      apiKey: target.token,
      apiKeyHeader: "authorization",
      apiKeyScheme: "Bearer",
      apiKeySource: "the relay's token (rollout_worker.distributed)",
      maxRetries: 0,
      timeoutMs: NO_TIMEOUT_MS,
    });
  }

  completion(prompt: string | number[], options: InferenceOptions = {}): Promise<InferenceResult> {
    const { signal, ...rest } = options;
    return this.call({ kind: "completion", prompt, options: rest }, signal);
  }

  chat(messages: readonly ChatMessage[], options: InferenceOptions = {}): Promise<InferenceResult> {
    const { signal, ...rest } = options;
    return this.call({ kind: "chat", messages: [...messages], options: rest }, signal);
  }

  /** Closes the client's connections. */
  close(): Promise<void> {
    return this.http.close();
  }

  private async call(call: RelayCall, signal: AbortSignal | undefined): Promise<InferenceResult> {
    try {
      const { body } = await this.http.request<string>({
        method: "POST",
        path: "/inference",
        encodedBody: encode(call),
        retry: "none",
        ...(signal && { signal }),
      });
      return decode<InferenceResult>(body);
    } catch (error) {
      // An answer of the relay's own (its failure, or a refusal); anything else (no answer) as it came.
      if (error instanceof APIError && error.status !== undefined && typeof error.body === "string") {
        const failure = decode<RelayFailure>(error.body);
        throw new RelayCallError(
          `the run's inference relay answered ${error.status}: ${failure.error}: ${failure.message}`,
          { status: error.status, isRetryable: failure.retryable },
        );
      }
      throw error;
    }
  }
}
