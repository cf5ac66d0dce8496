/**
 * {@link AgentGateway}: the agent service's HTTP server. Each rollout gets an OpenAI-compatible
 * API at `/rollouts/{rolloutId}/v1` that forwards to the rollout's inference client and records
 * every call token-exact; agents in other processes claim tasks and push finished episodes.
 * @module
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { RolloutTask } from "../contracts/task.js";
import type { InferenceClient, InferenceResult } from "../contracts/inference.js";
import { AnthropicMessages } from "../server/anthropic-endpoints.js";
import { sendAnthropicError } from "../server/anthropic-protocol.js";
import { hostAddresses, listen } from "../server/bind.js";
import {
  decodedChoice,
  endpointPath,
  modelList,
  OpenAIEndpoints,
  requestSampling,
  type ErrorWriter,
  type Generation,
  type GenerationCall,
  type OpenAIGenerator,
} from "../server/openai-endpoints.js";
import { openAIErrorOf, sendOpenAIError, type GenerationRequest } from "../server/openai-protocol.js";
import { BrowserGuard } from "../server/browser-guard.js";
import { ResponsesEndpoints } from "../server/responses-endpoints.js";
import { ResponseStore } from "../server/responses-store.js";
import type { ToolCall } from "../wire/tokenizer.js";
import { sendJson } from "../server/io.js";
import { decodePathSegment } from "../server/url-path.js";
import { ExternalAgents } from "./external.js";
import { pushedRolloutId, type PushedEpisode, type PushRules } from "./push.js";
import { answeredArguments, messagesToRender, renderChat } from "./render.js";
import { templateRendersToolCalls } from "../inference/chat-formats/tool-calls-in-text.js";
import { RolloutSession, type RolloutOptions } from "./session.js";
import { ConfigError, ContextLengthError, ProtocolError, type ListenProblem } from "../errors.js";

/** Options of {@link AgentGateway.start}. */
export interface AgentGatewayOptions {
  /** Interface to bind (default `127.0.0.1`: only this machine can connect). */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** The model name `/v1/models` lists (default `policy`); requests may name any model. */
  modelName?: string;
  /** Largest request body in bytes (default 16 MiB). */
  maxBodyBytes?: number;
  /** Longest wait of a `POST /tasks/claim`, in ms (default 30 000). */
  maxClaimWaitMs?: number;
  /** Do not keep the process alive for the gateway alone. */
  unref?: boolean;
  /** Where failures of the model (500 answers) are reported (default: standard error). */
  log?: (line: string) => void;
  /** Host names the `Host` header may give besides the bound address (and, on loopback, `localhost`); others get 403. */
  allowedHosts?: readonly string[];
  /** Origins whose browser requests are served, with CORS headers (`*` for any); other cross-origin requests get 403. */
  corsOrigins?: readonly string[];
}

/** Header naming the rollout of a request sent to `/v1/...` instead of `/rollouts/{id}/v1/...`. */
export const ROLLOUT_ID_HEADER = "x-nexrl-rollout-id";

/** Rollout ids remembered after they finish, to answer 410 instead of 404. */
const FINISHED_MEMORY = 4096;

/** A rollout id: 128 random bits. */
function newRolloutId(): string {
  return `r-${randomBytes(16).toString("base64url")}`;
}

const notFound = (id: string) =>
  new ProtocolError(
    `unknown rollout \`${id}\`; use the base URL the rollout was given (ids are random and valid only while the rollout runs)`,
    { status: 404, code: "rollout_not_found", openaiType: "invalid_request_error" },
  );
const finished = (id: string) =>
  new ProtocolError(`rollout \`${id}\` has finished; its episode is scored and no more calls are recorded`, {
    status: 410,
    code: "rollout_finished",
    openaiType: "invalid_request_error",
  });

/**
 * The agent service's server: a recording OpenAI-compatible gateway per rollout, plus the
 * endpoints of external agents.
 *
 * Per rollout, at `/rollouts/{id}/v1` (or at `/v1` with the header `x-nexrl-rollout-id: {id}`):
 * - `GET /models`: the served model.
 * - `POST /chat/completions`: `messages` (with `tools`, `tool_choice`) rendered with the model's
 *   chat template and sampled as token ids; tool calls are parsed out of the text in the model
 *   family's format (the rollout's `toolParser`, else the one its chat template writes; finish
 *   reason `tool_calls`), reasoning into `reasoning_content`; `stream` answers server-sent events.
 * - `POST /completions`: one prompt (text, encoded with BOS, or token ids).
 * - `POST /responses` (OpenAI's Responses API, streamed or not, as in `nexrl serve`),
 *   and `GET`/`DELETE /responses/{id}`: input items become the same chat as chat completions
 *   (function calls sent back as `function_call` items, results as `function_call_output`), so
 *   answered turns are rendered as their sampled tokens too; stored responses (the last 1000,
 *   for `previous_response_id` and `item_reference`) belong to the rollout, and ids of another
 *   rollout answer 404. Calls are recorded with the endpoint `responses`.
 * - `POST /messages`, `POST /messages/count_tokens`: Anthropic's Messages API (point the
 *   `@anthropic-ai/sdk` client at `/rollouts/{id}`, without `/v1`: it adds `/v1/messages`),
 *   translated to the same chat path; tool calls are answered as `tool_use` blocks with `toolu_`
 *   ids, and an assistant turn sent back as its blocks is rendered as the sampled tokens. Its
 *   errors have Anthropic's shape `{ type: "error", error: { type, message } }`.
 *
 * One choice per call (`n` 1). Every call is recorded: prompt and completion token ids exactly as
 * the model read and sampled them, logprobs, finish reason, tool calls and timing. An assistant
 * message the gateway answered, sent back unchanged, is rendered as the tokens the model sampled
 * (unless the rollout's `replayAnswers` is `text`), so a well-behaved agent's prompts continue
 * each other token for token. vLLM's
 * `return_token_ids` and `return_tokens_as_token_ids` work as in `nexrl serve`.
 *
 * External agents: `POST /tasks/claim` (`{ wait_seconds? }`) answers a task with its rollout's
 * base URL, or 204 when none came; `POST /trajectories` completes a claimed rollout (see
 * `parsePush`). `GET /healthz` answers `{ ok: true }`.
 *
 * Errors have OpenAI's shape `{ error: { message, type, param, code } }`: 404
 * `rollout_not_found`, 410 `rollout_finished`, 400 for malformed requests and for
 * `rollout_limit_reached` (turns, tokens, time, context), 500 when the model fails.
 */
export class AgentGateway {
  private readonly sessions = new Map<string, RolloutSession>();
  private readonly finishedIds = new Set<string>();
  private readonly external = new ExternalAgents();
  private readonly closing = new AbortController();
  private readonly modelName: string;
  private readonly maxClaimWaitMs: number;
  private readonly endpoints: OpenAIEndpoints;
  private readonly messages: AnthropicMessages;
  private readonly responses: ResponsesEndpoints;
  /** Each rollout's stored responses: `previous_response_id` and `item_reference` reach only those of their own rollout. */
  private readonly responseStores = new WeakMap<RolloutSession, ResponseStore>();

  private constructor(
    private readonly server: Server,
    /** The server's address, `http://host:port`. */
    readonly url: string,
    options: AgentGatewayOptions,
    private readonly guard: BrowserGuard,
  ) {
    this.modelName = options.modelName ?? "policy";
    this.maxClaimWaitMs = options.maxClaimWaitMs ?? 30_000;
    const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    this.endpoints = new OpenAIEndpoints({
      server: "the nexrl agent gateway",
      maxBodyBytes: options.maxBodyBytes ?? 16 * 1024 * 1024,
      log: (line) => log(`nexrl agent gateway: ${line}`),
    });
    this.messages = new AnthropicMessages(this.endpoints, "the nexrl agent gateway");
    this.responses = new ResponsesEndpoints(this.endpoints, "the nexrl agent gateway");
  }

  /**
   * Starts a gateway.
   * @throws {@link "nexrl/errors".ConfigError | ConfigError} when the address cannot be bound.
   */
  static async start(options: AgentGatewayOptions = {}): Promise<AgentGateway> {
    const host = options.host ?? "127.0.0.1";
    const port = options.port ?? 0;
    const server = createServer();
    const hint = (problem: ListenProblem) =>
      problem === "bad_host"
        ? "set rollout_worker.agent.gateway.host to an address of this machine (127.0.0.1 by default)"
        : "set rollout_worker.agent.gateway.port to a free port of 1024 or above (0 picks one)";
    let guard: BrowserGuard;
    try {
      guard = new BrowserGuard({
        boundHost: host,
        boundAddresses: await hostAddresses(host, hint),
        allowedHosts: options.allowedHosts,
        corsOrigins: options.corsOrigins,
        server: "the nexrl agent gateway",
      });
      await listen(server, port, host, hint);
    } catch (error) {
      throw new ConfigError(`the agent gateway: ${(error as Error).message}`, { cause: error });
    }
    if (options.unref) server.unref();
    const address = server.address() as AddressInfo;
    const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
    const gateway = new AgentGateway(server, `http://${shown}:${address.port}`, options, guard);
    // Attached before any request can be read: the listen callback resumed us in a microtask.
    server.on("request", (req, res) => void gateway.handle(req, res));
    return gateway;
  }

  /** Rollouts open now. */
  get openRollouts(): number {
    return this.sessions.size;
  }

  /** Opens a rollout whose calls `inference` answers, with `options` (limits, rendering); finish it with `session.finish()`. */
  openRollout(inference: InferenceClient, options: RolloutOptions = {}): RolloutSession {
    const id = newRolloutId();
    const session = new RolloutSession(id, `${this.url}/rollouts/${id}/v1`, inference, options, (done) =>
      this.forget(done),
    );
    this.sessions.set(id, session);
    return session;
  }

  /**
   * Offers `task` to external agents, to be run in `session`; resolves with the episode one of
   * them pushes. Rejects when `signal` aborts first (the offer is withdrawn).
   */
  async offerTask(
    session: RolloutSession,
    task: RolloutTask,
    rules: PushRules,
    signal: AbortSignal,
  ): Promise<PushedEpisode> {
    signal.throwIfAborted();
    const pushed = this.external.offer(session, task, this.modelName, rules);
    let onAbort = (): void => undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([pushed, aborted]);
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.external.withdraw(session.id);
    }
  }

  /** Stops listening, drops connections and finishes every open rollout. */
  async close(): Promise<void> {
    this.closing.abort();
    for (const session of [...this.sessions.values()]) session.finish();
    // Let waiting claims answer 503 before the connections drop.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private forget(session: RolloutSession): void {
    this.sessions.delete(session.id);
    this.responseStores.delete(session);
    this.finishedIds.add(session.id);
    if (this.finishedIds.size > FINISHED_MEMORY) this.finishedIds.delete(this.finishedIds.values().next().value!);
  }

  private session(id: string): RolloutSession {
    const session = this.sessions.get(id);
    if (session?.isOpen) return session;
    throw this.finishedIds.has(id) || session ? finished(id) : notFound(id);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (this.guard.check(req, res)) return;
    } catch (error) {
      sendOpenAIError(res, openAIErrorOf(error));
      return;
    }
    const path = endpointPath(req);
    const match = /^\/rollouts\/([^/]+)(\/v1\/.*)$/.exec(path);
    const header = req.headers[ROLLOUT_ID_HEADER];
    const rolloutId = (): string | undefined =>
      match ? decodePathSegment(match[1]!, "rollout id") : typeof header === "string" ? header : undefined;
    // The Anthropic SDK adds /v1 to its base URL, so the rollout's base URL given as it is doubles it.
    const doubled = path.includes("/v1/v1/")
      ? " (the Anthropic SDK adds /v1 itself: give it the rollout's base URL without the trailing /v1)"
      : "";
    const route = this.route(match ? match[2]! : path, rolloutId, req, res) ?? {
      method: req.method ?? "GET",
      run: async () => {
        throw new ProtocolError(
          `no route ${req.method ?? "GET"} ${path}${doubled}; the gateway serves /rollouts/{rolloutId}/v1/{models,completions,chat/completions,responses,messages,messages/count_tokens}, POST /tasks/claim and POST /trajectories`,
          { status: 404, code: "not_found", openaiType: "invalid_request_error" },
        );
      },
      ...(path.endsWith("/messages") && { sendError: sendAnthropicError }),
    };
    // Under /rollouts/{id} even when the rest of the path is wrong (a base URL that lost its /v1).
    const named = /^\/rollouts\/([^/]+)/.exec(path)?.[1] ?? (typeof header === "string" ? header : undefined);
    const session = this.openSession(named);
    const sendError = route.sendError ?? sendOpenAIError;
    const request = `${req.method ?? "GET"} ${path}`;
    await this.endpoints.answer(
      req,
      res,
      path,
      route.method,
      route.run,
      session
        ? (response, error, headers) => {
            // The id is random: written as a placeholder, the note reads the same in every rollout.
            session.noteFailedRequest(
              `${error.status} ${error.message}${error.message.includes(request) ? "" : ` (${request})`}`.replaceAll(
                session.id,
                "{rolloutId}",
              ),
            );
            sendError(response, error, headers);
          }
        : sendError,
    );
  }

  /** The open rollout a request names (ids are base64url: no decoding needed), if any: its failed requests are noted. */
  private openSession(id: string | undefined): RolloutSession | undefined {
    const session = id === undefined ? undefined : this.sessions.get(id);
    return session?.isOpen ? session : undefined;
  }

  /** The method and handler of `route` (a path under `/v1` when a rollout is given), or undefined. */
  private route(
    route: string,
    rolloutId: () => string | undefined,
    req: IncomingMessage,
    res: ServerResponse,
  ): { method: string | readonly string[]; run: () => Promise<void>; sendError?: ErrorWriter } | undefined {
    const inRollout = (run: (session: RolloutSession) => Promise<void>) => async () => {
      const id = rolloutId();
      if (id === undefined) {
        throw new ProtocolError(
          `no rollout given: call ${route} under the rollout's base URL (/rollouts/{rolloutId}/v1) or send the header ${ROLLOUT_ID_HEADER}`,
          { status: 400, code: "rollout_missing", openaiType: "invalid_request_error" },
        );
      }
      await run(this.session(id));
    };
    const responses = this.responses.route(route, req, res);
    if (responses)
      return {
        method: responses.method,
        run: inRollout((session) =>
          responses.run(this.responseStore(session), (request) => this.generator(session, request)),
        ),
      };
    switch (route) {
      case "/healthz":
        return {
          method: "GET",
          run: async () => sendJson(res, 200, { ok: true, open_rollouts: this.sessions.size }),
        };
      case "/tasks/claim":
        return { method: "POST", run: async () => this.claim(await this.endpoints.readBody(req), res) };
      case "/trajectories":
        return { method: "POST", run: async () => this.push(await this.endpoints.readBody(req), res) };
      case "/v1/models":
        return {
          method: "GET",
          run: async () => {
            const id = rolloutId();
            if (id !== undefined) this.session(id);
            sendJson(res, 200, modelList([this.modelName], 0));
          },
        };
      case "/v1/chat/completions":
        return {
          method: "POST",
          run: inRollout((session) => this.endpoints.chat(req, res, (request) => this.generator(session, request))),
        };
      case "/v1/messages":
        return {
          method: "POST",
          run: inRollout((session) =>
            this.messages.create(req, res, (request) => this.generator(session, request), {
              argumentsOf: answeredArguments(session.answered),
            }),
          ),
          sendError: sendAnthropicError,
        };
      case "/v1/messages/count_tokens":
        return {
          method: "POST",
          run: inRollout((session) =>
            this.messages.countTokens(req, res, (request) => this.generator(session, request), {
              argumentsOf: answeredArguments(session.answered),
            }),
          ),
          sendError: sendAnthropicError,
        };
      case "/v1/completions":
        return {
          method: "POST",
          run: inRollout((session) =>
            this.endpoints.completions(req, res, (request) => {
              if (Array.isArray(request.prompt) && typeof request.prompt[0] !== "number")
                throw new ProtocolError(
                  "prompt: the gateway records one prompt per call; send the prompts one by one",
                  { status: 400, openaiType: "invalid_request_error", param: "prompt" },
                );
              return this.generator(session, request);
            }),
          ),
        };
      default:
        return undefined;
    }
  }

  private responseStore(session: RolloutSession): ResponseStore {
    let store = this.responseStores.get(session);
    if (!store) this.responseStores.set(session, (store = new ResponseStore()));
    return store;
  }

  /**
   * The generator of a call in `session`: one choice, rendered with the rollout's answered
   * messages, sampled within its limits, and recorded.
   */
  private generator(session: RolloutSession, request: GenerationRequest): OpenAIGenerator {
    if ((request.n ?? 1) !== 1)
      throw new ProtocolError(
        "n: the gateway records one choice per call; send n: 1 (or leave it out) and call again for more",
        { status: 400, openaiType: "invalid_request_error", param: "n" },
      );
    const tokenizer = session.inference.tokenizer;
    const parser = session.chatParser;
    const write = (content: string, calls: readonly ToolCall[]) => parser.write(content, calls);
    return {
      tokenizer,
      chatParser: parser,
      renderChat: (messages, options) =>
        session.options.replayAnswers === "text"
          ? tokenizer.applyChatTemplate(
              messagesToRender(messages, session.answered, templateRendersToolCalls(tokenizer), write),
              options,
            )
          : renderChat(tokenizer, messages, session.answered, options, write),
      generate: (prompt, request, call) => this.sample(session, prompt, request, call),
    };
  }

  /** Samples one choice of `prompt` within the rollout's limits and records the call. */
  private async sample(
    session: RolloutSession,
    prompt: number[],
    request: GenerationRequest,
    { maxTokens, chat }: GenerationCall,
  ): Promise<Generation> {
    const budget = session.admit(maxTokens);
    const startedAt = Date.now();
    const t0 = performance.now();
    let result: InferenceResult;
    try {
      const turnEnds = chat ? session.inference.tokenizer.turnEndIds : undefined;
      result = await session.inference.completion(prompt, {
        ...requestSampling(request, budget.maxTokens),
        ...(turnEnds && { stopTokenIds: turnEnds }),
        signal: session.signal,
      });
    } catch (error) {
      session.release(budget);
      if (error instanceof ContextLengthError) session.truncate("context_length", error.message);
      if (session.signal.aborted || (error instanceof Error && error.name === "AbortError")) {
        if (!session.isOpen) throw finished(session.id);
        throw new ProtocolError(
          `this episode was cut short (${String((session.signal.reason as Error | undefined)?.message ?? "the rollout was stopped")})`,
          { status: 400, code: "rollout_limit_reached", openaiType: "invalid_request_error" },
        );
      }
      throw error;
    }
    const tokenizer = session.inference.tokenizer;
    const choice = decodedChoice(tokenizer, result.responseTokens, result.logprobs, result.finishReason, request, chat);
    const toolCalls = choice.toolCalls ?? [];
    // Ids beyond the tokenizer (counted by the rollout's inference client) read as nothing.
    const generated = tokenizer.decode(result.responseTokens, { unknownIds: "skip" });
    session.record(
      {
        turn: budget.turn,
        endpoint: chat ? (chat.dialect ?? "chat.completions") : "completions",
        promptTokens: result.promptTokens,
        completionTokens: result.responseTokens,
        logprobs: result.logprobs,
        finishReason: toolCalls.length > 0 ? "tool_calls" : result.finishReason,
        text: generated,
        toolCalls,
        ...(choice.malformedToolCalls !== undefined && { malformedToolCalls: choice.malformedToolCalls }),
        ...(chat && { messages: chat.messages }),
        reply: {
          content: choice.text,
          toolCalls,
          ...(choice.reasoning !== undefined && { reasoning: choice.reasoning }),
        },
        ...(result.policyVersion !== undefined && { policyVersion: result.policyVersion }),
        ...(result.retokenized && { retokenized: result.retokenized }),
        startedAt,
        durationMs: performance.now() - t0,
      },
      budget,
      { content: choice.text, toolCalls, generated, tokens: result.responseTokens },
    );
    return { choices: [choice], promptTokens: result.promptTokens };
  }

  private async claim(body: unknown, res: ServerResponse): Promise<void> {
    const waitSeconds = (body as { wait_seconds?: unknown } | null)?.wait_seconds;
    if (waitSeconds !== undefined && (typeof waitSeconds !== "number" || !(waitSeconds >= 0))) {
      throw new ProtocolError("wait_seconds: must be a number >= 0 (seconds to wait for a task)", {
        status: 400,
        openaiType: "invalid_request_error",
        param: "wait_seconds",
      });
    }
    const waitMs = Math.min((waitSeconds ?? 10) * 1000, this.maxClaimWaitMs);
    const claimed = await this.external.claim(waitMs, this.closing.signal);
    if (this.closing.signal.aborted)
      throw new ProtocolError("the agent gateway is shutting down: the run has ended", {
        status: 503,
        code: "gateway_closed",
        openaiType: "server_error",
      });
    if (!claimed) {
      res.writeHead(204).end();
      return;
    }
    sendJson(res, 200, claimed);
  }

  private push(body: unknown, res: ServerResponse): void {
    const id = pushedRolloutId(body);
    const episode = this.external.push(id, body);
    const calls = this.sessions.get(id)?.recordedCalls ?? 0;
    sendJson(res, 200, {
      accepted: true,
      rollout_id: id,
      trajectories: episode.trajectories?.length ?? "from_recorded_calls",
      recorded_calls: calls,
    });
  }
}
