/**
 * {@link RolloutSession}: the gateway's state for one rollout — its inference client, its limits,
 * the calls recorded so far, and the assistant messages it answered.
 * @module
 */
import type { InferenceClient } from "../contracts/inference.js";
import {
  chatParserFor,
  templateChatParser,
  tokenizerChoice,
  type ChatParser,
} from "../inference/chat-formats/index.js";
import type { AnsweredMessage } from "./render.js";
import type { FailedRequests, GatewayCall, RolloutTrace, TruncationReason } from "./trace.js";
import { ProtocolError } from "../errors.js";

/** How a rollout's calls are rendered and limited. */
export interface RolloutOptions {
  /** Most model calls (default: unlimited); the next one is refused and the episode is truncated. */
  maxTurns?: number;
  /** Most tokens sampled over the whole episode (default: unlimited); each call's `max_tokens` is capped to what is left. */
  maxTokens?: number;
  /** Most tokens of one call: the `max_tokens` of calls that give none, and the cap of those that ask for more (default 256). */
  maxTokensPerCall?: number;
  /**
   * How an assistant message the gateway answered is rendered when the agent sends it back
   * unchanged: `tokens` (default) splices in the very tokens the model sampled, so the prompt
   * continues token for token; `text` renders the generated text through the chat template, as a
   * server would (templates that rewrite earlier turns then break the prefix, which is reported).
   */
  replayAnswers?: "tokens" | "text";
  /**
   * The tool-call format of the model's replies (`service.inference_service.tool_parser`: SGLang's
   * names such as `qwen25`, `qwen3_coder`, `llama3`, or a family id); default: the format the
   * tokenizer's chat template writes.
   */
  toolParser?: string;
  /** How reasoning is split out of replies (`reasoning_parser`: `think_tag`, `qwen3`, `deepseek-r1`, `gpt-oss`, `none`); default: the format's own. */
  reasoningParser?: string;
}

/** What a call may sample, once the limits allow it. @internal */
export interface CallBudget {
  /** Its turn. */
  turn: number;
  /** `max_tokens` after the episode budget. */
  maxTokens: number;
  /** Whether the episode budget lowered it. */
  capped: boolean;
}

/** Answered when a limit refuses a call: 400, so that OpenAI clients do not retry. */
function limitError(message: string): ProtocolError {
  return new ProtocolError(message, {
    status: 400,
    code: "rollout_limit_reached",
    openaiType: "invalid_request_error",
  });
}

/**
 * One rollout's state in the gateway. Calls are numbered by arrival; a limit (turns, episode
 * tokens, a timeout, the model's context) truncates the episode; {@link RolloutSession.finish}
 * closes it and returns the trace.
 */
export class RolloutSession {
  private readonly calls: GatewayCall[] = [];
  private readonly answeredMessages: AnsweredMessage[] = [];
  private readonly abort = new AbortController();
  private started = 0;
  private sampled = 0;
  private reserved = 0;
  private truncation: RolloutTrace["truncation"];
  private failed: FailedRequests | undefined;
  private open = true;
  /** Reads the tool calls and reasoning of this rollout's replies. */
  readonly chatParser: ChatParser;

  /**
   * @param id the rollout id.
   * @param baseURL the rollout's OpenAI-compatible base URL (ends in `/v1`).
   * @param inference what samples this rollout's calls.
   * @param options limits, defaults and rendering.
   * @param onFinish called once when the rollout finishes.
   * @throws {@link "nexrl/errors".ConfigError | ConfigError} for an unknown `toolParser` or `reasoningParser`, or a reasoning
   *   parser that cannot read the format.
   */
  constructor(
    readonly id: string,
    readonly baseURL: string,
    readonly inference: InferenceClient,
    readonly options: RolloutOptions = {},
    private readonly onFinish?: (session: RolloutSession) => void,
  ) {
    const { toolParser, reasoningParser } = options;
    this.chatParser =
      toolParser === undefined && reasoningParser === undefined
        ? templateChatParser(inference.tokenizer)
        : chatParserFor({
            ...tokenizerChoice(inference.tokenizer),
            ...(toolParser !== undefined && { toolParser }),
            ...(reasoningParser !== undefined && { reasoningParser }),
          });
  }

  /** Aborted when the rollout finishes or is truncated by a timeout: cancels calls in flight. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Whether calls are still accepted. */
  get isOpen(): boolean {
    return this.open;
  }

  /** Calls recorded so far. */
  get recordedCalls(): number {
    return this.calls.length;
  }

  /** The assistant messages answered so far. @internal */
  get answered(): readonly AnsweredMessage[] {
    return this.answeredMessages;
  }

  /**
   * Admits a call asking for `requested` tokens (undefined: the default).
   * @throws ProtocolError 400 `rollout_limit_reached` when the episode is out of turns or tokens or was truncated.
   * @internal
   */
  admit(requested: number | undefined): CallBudget {
    if (this.truncation)
      throw limitError(
        `this episode was cut short (${this.truncation.message}); the gateway takes no more calls for it`,
      );
    const { maxTurns, maxTokens } = this.options;
    if (maxTurns !== undefined && this.started >= maxTurns) {
      throw limitError(
        this.truncate("max_turns", `the episode made its ${maxTurns} model calls (rollout_worker.agent.max_turns)`),
      );
    }
    const perCall = this.options.maxTokensPerCall ?? 256;
    let budget = Math.min(requested ?? perCall, perCall);
    let capped = false;
    if (maxTokens !== undefined) {
      const left = maxTokens - this.sampled - this.reserved;
      if (left <= 0)
        throw limitError(
          this.truncate("max_tokens", `the episode sampled its ${maxTokens} tokens (rollout_worker.agent.max_tokens)`),
        );
      if (left < budget) {
        budget = left;
        capped = true;
      }
    }
    this.started++;
    this.reserved += budget;
    return { turn: this.started, maxTokens: budget, capped };
  }

  /** Records a finished call admitted with `budget`; a call cut by the episode budget truncates the episode. @internal */
  record(call: GatewayCall, budget: CallBudget, answered: AnsweredMessage): void {
    if (!this.open) return;
    this.reserved -= budget.maxTokens;
    this.sampled += call.completionTokens.length;
    this.calls.push(call);
    this.answeredMessages.push(answered);
    if (budget.capped && call.finishReason === "length")
      this.truncate(
        "max_tokens",
        `the episode sampled its ${this.options.maxTokens} tokens (rollout_worker.agent.max_tokens)`,
      );
  }

  /**
   * Notes a request of this rollout the gateway answered with an error (`first` describes it),
   * so that an episode none of whose calls succeeded can say why. @internal
   */
  noteFailedRequest(first: string): void {
    if (!this.open) return;
    if (this.failed) this.failed.count++;
    else this.failed = { count: 1, first };
  }

  /** Gives back the budget of a call that failed. @internal */
  release(budget: CallBudget): void {
    this.reserved -= budget.maxTokens;
  }

  /**
   * Marks the episode truncated (the first reason wins) and returns the message. A timeout also
   * cancels the calls in flight.
   */
  truncate(reason: TruncationReason, message: string): string {
    this.truncation ??= { reason, message };
    if (reason === "timeout") this.abort.abort(new Error(message));
    return message;
  }

  /** Closes the rollout (later calls are answered 410) and returns what it recorded. */
  finish(): RolloutTrace {
    if (this.open) {
      this.open = false;
      this.onFinish?.(this);
    }
    if (!this.abort.signal.aborted) this.abort.abort(new Error(`rollout ${this.id} finished`));
    const calls = [...this.calls].sort((a, b) => a.turn - b.turn);
    return {
      rolloutId: this.id,
      calls,
      ...(this.failed && { failedRequests: { ...this.failed } }),
      ...(this.truncation && { truncation: this.truncation }),
    };
  }
}
