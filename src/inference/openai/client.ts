/**
 * An {@link InferenceClient} over an OpenAI-compatible server (vLLM, SGLang, `nexrl serve`),
 * token-in/token-out, over the undici {@link HttpTransport}.
 *
 * @module
 */
import type { ErrorHints } from "../../http/errors.js";
import { HttpTransport, type HttpResponse } from "../../http/transport.js";
import { encodePrompt, type ChatMessage, type Tokenizer, type ToolCall } from "../../wire/tokenizer.js";
import type { FinishReason, InferenceClient, InferenceOptions, InferenceResult } from "../../contracts/inference.js";
import { parseTokenIdStrings, type VllmTokenIdFields, type VllmTokenIdRequestFields } from "./vllm.js";
import { UnexpectedResponseError } from "../../errors.js";

/** Sampling parameters a client applies when a call does not give them. */
export type SamplingDefaults = Pick<InferenceOptions, "maxTokens" | "temperature" | "topP" | "topK" | "stop" | "seed">;

/** Options of {@link OpenAIInferenceClient}. */
export interface OpenAIInferenceClientOptions {
  /** Address of the OpenAI-compatible API, usually ending in `/v1` (e.g. `http://127.0.0.1:8000/v1`). */
  baseURL: string;
  /** API key (default: `$OPENAI_API_KEY`, else `EMPTY`, which vLLM accepts). Never printed. */
  apiKey?: string;
  /** Name of the served model (a vLLM LoRA adapter, a Tinker sampler path, …). */
  model: string;
  /** The tokenizer of the served model (it encodes text prompts into the ids sent). */
  tokenizer: Tokenizer;
  /** Policy version of `model` (0 for the base model); reported in every result. */
  policyVersion?: number;
  /** Sampling parameters of calls that do not give them; `maxTokens` defaults to 256. */
  defaults?: SamplingDefaults;
  /** Milliseconds before a request is abandoned (default 600 000). */
  timeoutMs?: number;
  /** Retries of connection failures, timeouts, 408, 429 and 5xx, with jittered backoff honouring `retry-after` (default 2). */
  maxRetries?: number;
  /**
   * Re-tokenise locally when the server reports no token ids (default false: such a call fails
   * with {@link UnexpectedResponseError}). Re-tokenised ids may differ from the ones the model
   * saw; results list what was re-tokenised in `retokenized`.
   */
  allowRetokenize?: boolean;
  /**
   * How `chat` reaches the model. `chat` (default): `/v1/chat/completions`, where the server
   * applies its chat template, reports the prompt's ids (vLLM ≥ 0.10.2) and parses tool calls.
   * `completions`: the client applies the tokenizer's chat template and sends the ids to
   * `/v1/completions` — token-exact on any server that accepts token-id prompts, but without
   * server-side tool-call parsing.
   */
  chatVia?: "chat" | "completions";
  /**
   * Most connections open at once to the server (default 1000). Each call in flight needs one:
   * calls beyond the limit wait for a free connection, so give at least the number of calls you
   * make at once (e.g. the rollouts in flight).
   */
  connections?: number;
  /** Extra fields for every request body, such as `{ min_tokens: 1 }` or SGLang options. */
  extraBody?: Record<string, unknown>;
}

const DEFAULT_MAX_TOKENS = 256;

/** What to do about a failure of an OpenAI-compatible server, in the words of this client's options. */
const INFERENCE_HINTS: ErrorHints = {
  status: {
    404: "Check baseURL (it usually ends in /v1) and the model name the server serves (GET /v1/models).",
    429: "The server is overloaded; lower the number of concurrent rollouts or raise maxRetries.",
  },
  timeout: "raise timeoutMs or lower maxTokens",
};

/** The logprobs of a `/v1/completions` choice. */
interface CompletionLogprobs {
  tokens?: string[] | null;
  token_logprobs?: Array<number | null> | null;
}

/** The fields of a `/v1/completions` answer the client reads. */
interface CompletionAnswer {
  choices?: Array<
    VllmTokenIdFields & { text?: string; finish_reason?: string | null; logprobs?: CompletionLogprobs | null }
  >;
}

/** The fields of a `/v1/chat/completions` answer the client reads (vLLM puts `prompt_token_ids` at the top). */
interface ChatCompletionAnswer extends VllmTokenIdFields {
  choices?: Array<{
    message?: {
      content?: string | null;
      tool_calls?: Array<{ id: string; type: string; function?: { name: string; arguments: string } }> | null;
    };
    finish_reason?: string | null;
    logprobs?: { content?: Array<{ token: string; logprob: number | null }> | null } | null;
    token_ids?: number[] | null;
  }>;
}

/** Maps an OpenAI `finish_reason` to nexrl's: a tool call or content filter also stopped the turn. */
function finishReasonOf(reason: string | null | undefined): FinishReason {
  return reason === "length" ? "length" : reason === "abort" ? "abort" : "stop";
}

/** Ids the server reported: vLLM's `token_ids`, else logprob tokens written `token_id:<n>`. */
function reportedIds(
  tokenIds: number[] | null | undefined,
  logprobTokens: readonly string[] | null | undefined,
): number[] | undefined {
  if (tokenIds) return tokenIds;
  return logprobTokens ? parseTokenIdStrings(logprobTokens) : undefined;
}

/**
 * Token-in/token-out inference against an OpenAI-compatible server.
 *
 * Token ids come from the server, never from re-encoding its text: `completion` sends the prompt
 * as token ids (a text prompt is encoded with BOS first) to `/v1/completions`; every request asks
 * for vLLM's `return_token_ids` (prompt and completion ids in the response) and, as a fallback for
 * older servers, `return_tokens_as_token_ids` (logprob tokens written `token_id:<n>`), plus
 * `logprobs` and `include_stop_str_in_output` (so the text matches the ids). When a server
 * reports neither, the call fails with {@link UnexpectedResponseError} naming the missing option,
 * unless `allowRetokenize` is set.
 *
 * `response` is the text the server returned (a stop string included; for a chat answer that
 * only calls tools it may be empty while `toolCalls` holds the calls).
 */
export class OpenAIInferenceClient implements InferenceClient {
  /** The tokenizer of the served model. */
  readonly tokenizer: Tokenizer;
  private readonly http: HttpTransport;
  private readonly baseURL: string;
  private modelName: string;
  private version: number | undefined;

  /** @param options server, model, tokenizer and defaults. */
  constructor(private readonly options: OpenAIInferenceClientOptions) {
    this.tokenizer = options.tokenizer;
    this.baseURL = options.baseURL.replace(/\/+$/, "");
    this.modelName = options.model;
    this.version = options.policyVersion;
    this.http = new HttpTransport({
      baseUrl: this.baseURL,
      apiKey: options.apiKey ?? process.env.OPENAI_API_KEY ?? "EMPTY",
      apiKeyHeader: "authorization",
      apiKeyScheme: "Bearer",
      apiKeySource: "apiKey (or OPENAI_API_KEY)",
      hints: INFERENCE_HINTS,
      timeoutMs: options.timeoutMs ?? 600_000,
      maxRetries: options.maxRetries ?? 2,
      ...(options.connections !== undefined && { connections: options.connections }),
    });
  }

  /** Aborts calls in flight and lets go of the connections to the server. */
  close(): Promise<void> {
    return this.http.close();
  }

  /** The model new calls sample from. */
  get model(): string {
    return this.modelName;
  }

  /** Version of the weights new calls sample from, when known. */
  get policyVersion(): number | undefined {
    return this.version;
  }

  /** Points new calls at `model` (e.g. the adapter or sampler path of a new training step), which serves `policyVersion`. */
  setModel(model: string, policyVersion?: number): void {
    this.modelName = model;
    this.version = policyVersion;
  }

  /** Continues `prompt` on `/v1/completions`; text is encoded with BOS ({@link encodePrompt}), token ids are sent as they are. */
  completion(prompt: string | number[], options: InferenceOptions = {}): Promise<InferenceResult> {
    return this.complete(typeof prompt === "string" ? encodePrompt(this.tokenizer, prompt) : prompt, options);
  }

  /** Answers a conversation (with `options.tools` and `options.chatTemplateKwargs`), as `chatVia` says. */
  chat(messages: readonly ChatMessage[], options: InferenceOptions = {}): Promise<InferenceResult> {
    if (this.options.chatVia === "completions") return this.complete(this.localChatPrompt(messages, options), options);
    return this.chatCompletion(messages, options);
  }

  /** `/v1/completions` of `promptTokens`. */
  private complete(promptTokens: number[], options: InferenceOptions): Promise<InferenceResult> {
    const policyVersion = this.version;
    const body = this.sampling(options);
    body.model = this.modelName;
    body.prompt = promptTokens;
    body.logprobs = 1;
    // A promise chain, not an async function: see bench/README.md on frames held per call in flight.
    return this.post("/completions", body, options).then((response) =>
      this.completionResult(this.answer<CompletionAnswer>("/completions", response), promptTokens, policyVersion),
    );
  }

  /** The result of a `/v1/completions` answer to `promptTokens`. */
  private completionResult(
    response: CompletionAnswer,
    promptTokens: number[],
    policyVersion: number | undefined,
  ): InferenceResult {
    const choice = response.choices?.[0];
    if (!choice)
      throw new UnexpectedResponseError(
        `POST ${this.baseURL}/completions returned no choice; check that the server is OpenAI-compatible`,
      );
    let responseTokens = reportedIds(choice.token_ids, choice.logprobs?.tokens);
    let retokenized: Array<"prompt" | "response"> | undefined;
    if (!responseTokens) {
      this.allowRetokenize("token_ids");
      responseTokens = this.tokenizer.encode(choice.text ?? "");
      retokenized = ["response"];
    }
    const logprobs = this.checkLogprobs("/completions", choice.logprobs?.token_logprobs, responseTokens.length);
    const result: InferenceResult = {
      promptTokens: choice.prompt_token_ids ?? promptTokens.slice(),
      responseTokens,
      response: choice.text ?? "",
      logprobs,
      finishReason: finishReasonOf(choice.finish_reason),
    };
    return this.stamp(result, retokenized, policyVersion);
  }

  private async chatCompletion(messages: readonly ChatMessage[], options: InferenceOptions): Promise<InferenceResult> {
    const policyVersion = this.version;
    const params = {
      ...this.sampling(options),
      model: this.modelName,
      messages,
      logprobs: true,
      ...(options.tools && options.tools.length > 0 && { tools: options.tools }),
      ...(options.chatTemplateKwargs && { chat_template_kwargs: options.chatTemplateKwargs }),
    };
    const response = this.answer<ChatCompletionAnswer>(
      "/chat/completions",
      await this.post("/chat/completions", params, options),
    );
    const choice = response.choices?.[0];
    if (!choice)
      throw new UnexpectedResponseError(
        `POST ${this.baseURL}/chat/completions returned no choice; check that the server is OpenAI-compatible`,
      );
    const text = choice.message?.content ?? "";
    const entries = choice.logprobs?.content ?? undefined;
    const retokenized: Array<"prompt" | "response"> = [];
    let promptTokens = response.prompt_token_ids ?? undefined;
    if (!promptTokens) {
      this.allowRetokenize("prompt_token_ids");
      promptTokens = this.localChatPrompt(messages, options);
      retokenized.push("prompt");
    }
    let responseTokens = reportedIds(
      choice.token_ids,
      entries?.map((e) => e.token),
    );
    if (!responseTokens) {
      this.allowRetokenize("token_ids");
      responseTokens = this.tokenizer.encode(text);
      retokenized.push("response");
    }
    const logprobs = this.checkLogprobs(
      "/chat/completions",
      entries?.map((e) => e.logprob),
      responseTokens.length,
    );
    const toolCalls: ToolCall[] = (choice.message?.tool_calls ?? []).flatMap((call) =>
      call.type === "function" && call.function
        ? [
            {
              id: call.id,
              type: "function" as const,
              function: { name: call.function.name, arguments: call.function.arguments },
            },
          ]
        : [],
    );
    return this.stamp(
      {
        promptTokens,
        responseTokens,
        response: text,
        logprobs,
        finishReason: finishReasonOf(choice.finish_reason),
        ...(toolCalls.length > 0 && { toolCalls }),
      },
      retokenized.length > 0 ? retokenized : undefined,
      policyVersion,
    );
  }

  /** A new request body with the fields every call shares: sampling parameters, the token-id options and `extraBody`. */
  private sampling(options: InferenceOptions): VllmTokenIdRequestFields & Record<string, unknown> {
    const d = this.options.defaults ?? {};
    const body: VllmTokenIdRequestFields & Record<string, unknown> = {
      max_tokens: options.maxTokens ?? d.maxTokens ?? DEFAULT_MAX_TOKENS,
      n: 1,
    };
    const temperature = options.temperature ?? d.temperature;
    if (temperature !== undefined) body.temperature = temperature;
    const topP = options.topP ?? d.topP;
    if (topP !== undefined) body.top_p = topP;
    const topK = options.topK ?? d.topK;
    if (topK !== undefined) body.top_k = topK;
    const stop = options.stop ?? d.stop;
    if (stop !== undefined && stop.length > 0) body.stop = stop;
    if (options.stopTokenIds !== undefined && options.stopTokenIds.length > 0)
      body.stop_token_ids = [...options.stopTokenIds];
    const seed = options.seed ?? d.seed;
    if (seed !== undefined) body.seed = seed;
    body.return_token_ids = true;
    body.return_tokens_as_token_ids = true;
    body.include_stop_str_in_output = true;
    if (this.options.extraBody) Object.assign(body, this.options.extraBody);
    return body;
  }

  private localChatPrompt(messages: readonly ChatMessage[], options: InferenceOptions): number[] {
    const { tools, chatTemplateKwargs } = options;
    return this.tokenizer.applyChatTemplate(messages, {
      addGenerationPrompt: true,
      ...(tools && { tools }),
      ...(chatTemplateKwargs && { chatTemplateKwargs }),
    });
  }

  /**
   * POSTs `body` to `path` (retrying as `maxRetries` allows: sampling has no side effects);
   * failures are the transport's {@link APIError}s, with this client's hints.
   */
  private post(path: string, body: Record<string, unknown>, options: InferenceOptions): Promise<HttpResponse> {
    return this.http.request({ method: "POST", path, body, retry: "all", signal: options.signal });
  }

  /** The parsed answer of a {@link OpenAIInferenceClient.post}, when it is a JSON object. */
  private answer<A>(path: string, response: HttpResponse): A {
    if (response.body === null || typeof response.body !== "object") {
      throw new UnexpectedResponseError(
        `POST ${this.baseURL}${path} answered ${response.body === undefined ? "with an empty body" : "with something other than a JSON object"}; check that the server is OpenAI-compatible`,
      );
    }
    return response.body as A;
  }

  /** Returns when re-tokenising is allowed; otherwise throws, naming the server option that is missing. */
  private allowRetokenize(missing: "prompt_token_ids" | "token_ids"): void {
    if (this.options.allowRetokenize) return;
    const message =
      missing === "prompt_token_ids"
        ? `the server at ${this.baseURL} reported no prompt_token_ids for the chat (vLLM's return_token_ids); serve the model with vLLM >= 0.10.2, ` +
          `set chatVia: "completions" to apply the chat template here and send token ids, or set allowRetokenize: true to apply it locally after the fact`
        : `the server at ${this.baseURL} reported no response token ids: neither token_ids (vLLM's return_token_ids) nor logprob tokens written token_id:<n> ` +
          `(return_tokens_as_token_ids); serve the model with vLLM >= 0.10.2 or a server that honours one of them, or set allowRetokenize: true to re-encode the text locally`;
    throw new UnexpectedResponseError(message);
  }

  private checkLogprobs(
    path: string,
    logprobs: ReadonlyArray<number | null> | null | undefined,
    count: number,
  ): number[] {
    let valid = logprobs !== null && logprobs !== undefined && logprobs.length === count;
    for (let i = 0; valid && i < count; i++) valid = typeof logprobs![i] === "number";
    if (!valid) {
      throw new UnexpectedResponseError(
        `POST ${this.baseURL}${path} returned ${logprobs ? `${logprobs.length} logprobs` : "no logprobs"} for ${count} response tokens; the server must honour logprobs${path === "/completions" ? ": 1" : ": true"} (with re-tokenised ids the counts can differ: use a server that reports token ids)`,
      );
    }
    return logprobs as number[];
  }

  /** `result` with the policy version and what was re-tokenised, when known. */
  private stamp(
    result: InferenceResult,
    retokenized: Array<"prompt" | "response"> | undefined,
    policyVersion: number | undefined,
  ): InferenceResult {
    if (policyVersion !== undefined) result.policyVersion = policyVersion;
    if (retokenized) result.retokenized = retokenized;
    return result;
  }
}
