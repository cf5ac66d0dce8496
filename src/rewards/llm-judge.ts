/**
 * {@link LlmJudge}: rewards from a language model reached through any OpenAI-compatible chat
 * endpoint. It scores one answer at a time (`score`) or ranks a group of answers to one task
 * (`rank`), with a rubric template, a cache of verdicts, a limit on requests in flight, a
 * timeout and retries; a reply with no usable score counts as a failed attempt like a timeout.
 * @module
 */
import OpenAI from "openai";
import pLimit, { type LimitFunction } from "p-limit";
import { JudgeError } from "../errors.js";
import type { LlmJudgeOptions } from "../contracts/judge.js";

/** What the judge is shown of one answer. */
export interface JudgeItem {
  /** The task, as text. */
  prompt: string;
  /** The answer. */
  response: string;
  /** The reference answer, when the task has one. */
  groundTruth?: string;
}

/** The judge's verdict on one answer. */
export interface JudgeVerdict {
  /** The reward, from 0 to 1. */
  score: number;
  /** Place in the group's ranking, 1 for the best (`rank` only). */
  rank?: number;
  /** The judge's reply, word for word. */
  reply: string;
  /** Attempts the request took (0 when it came from the cache). */
  attempts: number;
  /** True when an identical prompt was judged before in this run. */
  cached: boolean;
}

/** A reply turned into numbers, or why it could not be. */
type Parsed<T> = { ok: true; value: T } | { ok: false; why: string };

/** The last JSON object in `text` that parses, if any. */
function lastJsonObject(text: string): Record<string, unknown> | undefined {
  for (let end = text.lastIndexOf("}"); end >= 0; end = text.lastIndexOf("}", end - 1)) {
    for (let start = text.lastIndexOf("{", end); start >= 0; start = text.lastIndexOf("{", start - 1)) {
      try {
        const value: unknown = JSON.parse(text.slice(start, end + 1));
        if (typeof value === "object" && value !== null && !Array.isArray(value))
          return value as Record<string, unknown>;
      } catch {
        // not this span: try a wider one
      }
    }
  }
  return undefined;
}

/** A score from `{"score": x}` or a line `score: x`, in [0, 1]. */
export function parseScore(reply: string): Parsed<number> {
  const json = lastJsonObject(reply);
  let score: unknown = json?.score;
  if (score === undefined) {
    const line = reply.match(/score\s*[:=]\s*(-?\d+(?:\.\d+)?)/i);
    if (line) score = Number(line[1]);
  }
  if (typeof score === "string" && score.trim() !== "") score = Number(score);
  if (typeof score !== "number" || !Number.isFinite(score))
    return { ok: false, why: 'no score in the reply (expected {"score": <0 to 1>})' };
  if (score < 0 || score > 1) return { ok: false, why: `score ${score} is outside [0, 1]` };
  return { ok: true, value: score };
}

/** A ranking of `n` answers (numbers 1…n, best first) from `{"ranking": [...]}` or a line `ranking: 2, 1, 3`. */
export function parseRanking(reply: string, n: number): Parsed<number[]> {
  const json = lastJsonObject(reply);
  let ranking: unknown = json?.ranking;
  if (ranking === undefined) {
    const line = reply.match(/ranking\s*[:=]\s*\[?\s*(\d+(?:\s*[,>]\s*\d+)*)/i);
    if (line) ranking = line[1]!.split(/[,>]/).map((x) => Number(x.trim()));
  }
  if (!Array.isArray(ranking)) return { ok: false, why: 'no ranking in the reply (expected {"ranking": [...]})' };
  const numbers = ranking.map((x) => (typeof x === "string" ? Number(x) : x));
  const valid = numbers.length === n && numbers.every((x) => Number.isInteger(x) && x >= 1 && x <= n);
  if (!valid || new Set(numbers).size !== n)
    return { ok: false, why: `ranking ${JSON.stringify(ranking)} is not the numbers 1 to ${n}, each once` };
  return { ok: true, value: numbers as number[] };
}

/** `template` with each `{{name}}` replaced by `values[name]`. */
export function renderRubric(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(/\{\{\s*([^}]*?)\s*\}\}/g, (whole, name: string) => values[name] ?? whole);
}

/** Quotes a judge's reply for an error message, shortened to 600 characters. */
function quote(reply: string): string {
  return JSON.stringify(reply.length > 600 ? `${reply.slice(0, 600)}…` : reply);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A judge model behind an OpenAI-compatible endpoint. Requests share one concurrency limit;
 * each attempt has its own timeout; failed attempts (timeouts, HTTP errors, replies with no
 * usable score) are retried with a doubling delay, then reported as a {@link "nexrl/errors".JudgeError | JudgeError} that
 * quotes the last reply.
 *
 * @example
 * ```ts
 * const judge = new LlmJudge({ baseUrl: "http://127.0.0.1:8000/v1", model: "judge", scoreRubric, rankRubric });
 * const { score, reply } = await judge.score({ prompt: "What is 2 + 2?", response: "4", groundTruth: "4" });
 * ```
 */
export class LlmJudge {
  private readonly client: OpenAI;
  private readonly limit: LimitFunction;
  private readonly verdicts = new Map<string, Promise<{ reply: string; value: unknown; attempts: number }>>();
  private readonly options: Required<Omit<LlmJudgeOptions, "apiKey">>;

  /** @param options the endpoint, the rubrics and the limits. */
  constructor(options: LlmJudgeOptions) {
    this.options = {
      temperature: 0,
      maxTokens: 512,
      maxConcurrency: 8,
      timeoutMs: 60_000,
      maxRetries: 2,
      retryDelayMs: 250,
      cache: true,
      ...options,
    };
    this.client = new OpenAI({
      baseURL: options.baseUrl,
      apiKey: options.apiKey ?? "EMPTY",
      maxRetries: 0,
      timeout: this.options.timeoutMs,
    });
    this.limit = pLimit(this.options.maxConcurrency);
  }

  /** The judge model's name. */
  get model(): string {
    return this.options.model;
  }

  /**
   * Scores one answer from 0 to 1.
   * @throws {@link "nexrl/errors".JudgeError | JudgeError} when every attempt failed.
   */
  async score(item: JudgeItem): Promise<JudgeVerdict> {
    const prompt = renderRubric(this.options.scoreRubric, {
      prompt: item.prompt,
      response: item.response,
      ground_truth: item.groundTruth ?? "",
    });
    const { reply, value, attempts, cached } = await this.ask(prompt, parseScore);
    return { score: value, reply, attempts, cached };
  }

  /**
   * Ranks answers to one task (shown numbered from 1); the best scores 1, the worst 0, evenly
   * spaced between (a single answer scores 1).
   * @throws {@link "nexrl/errors".JudgeError | JudgeError} when every attempt failed.
   */
  async rank(items: readonly JudgeItem[]): Promise<JudgeVerdict[]> {
    const n = items.length;
    const prompt = renderRubric(this.options.rankRubric, {
      prompt: items[0]?.prompt ?? "",
      ground_truth: items[0]?.groundTruth ?? "",
      n: String(n),
      responses: items.map((item, i) => `Answer ${i + 1}:\n${item.response}`).join("\n\n"),
    });
    const { reply, value, attempts, cached } = await this.ask(prompt, (text) => parseRanking(text, n));
    return items.map((_, i) => {
      const rank = value.indexOf(i + 1) + 1;
      return { score: n === 1 ? 1 : (n - rank) / (n - 1), rank, reply, attempts, cached };
    });
  }

  /** The parsed reply to `prompt`: from the cache, or asked with retries. */
  private async ask<T>(
    prompt: string,
    parse: (reply: string) => Parsed<T>,
  ): Promise<{ reply: string; value: T; attempts: number; cached: boolean }> {
    if (!this.options.cache) return { ...(await this.askWithRetries(prompt, parse)), cached: false };
    const key = JSON.stringify([this.options.model, this.options.temperature, this.options.maxTokens, prompt]);
    const known = this.verdicts.get(key);
    if (known) {
      const verdict = await known;
      return { reply: verdict.reply, value: verdict.value as T, attempts: 0, cached: true };
    }
    const asked = this.askWithRetries(prompt, parse);
    this.verdicts.set(key, asked);
    // A failure is not a verdict: the next identical prompt asks again.
    asked.catch(() => this.verdicts.delete(key));
    return { ...(await asked), cached: false };
  }

  private async askWithRetries<T>(
    prompt: string,
    parse: (reply: string) => Parsed<T>,
  ): Promise<{ reply: string; value: T; attempts: number }> {
    const { maxRetries, retryDelayMs, model, baseUrl } = { ...this.options, baseUrl: this.client.baseURL };
    let lastReply: string | undefined;
    let lastWhy = "";
    for (let attempt = 1; attempt <= maxRetries + 1; attempt++) {
      if (attempt > 1) await sleep(retryDelayMs * 2 ** (attempt - 2));
      const answer = await this.limit(() => this.request(prompt));
      if ("error" in answer) {
        lastWhy = answer.error;
        continue;
      }
      lastReply = answer.reply;
      const parsed = parse(answer.reply);
      if (parsed.ok) return { reply: answer.reply, value: parsed.value, attempts: attempt };
      lastWhy = parsed.why;
    }
    const tries = maxRetries + 1;
    throw new JudgeError(
      `the judge (${model} at ${baseUrl}) gave no usable verdict in ${tries} attempt${tries === 1 ? "" : "s"}: ${lastWhy}` +
        (lastReply === undefined ? "" : `; its last reply: ${quote(lastReply)}`),
      { reply: lastReply },
    );
  }

  /** One request: the reply's text, or what went wrong (without the key). */
  private async request(prompt: string): Promise<{ reply: string } | { error: string }> {
    const { model, temperature, maxTokens, timeoutMs } = this.options;
    try {
      const completion = await this.client.chat.completions.create(
        { model, messages: [{ role: "user", content: prompt }], temperature, max_tokens: maxTokens },
        { signal: AbortSignal.timeout(timeoutMs) },
      );
      return { reply: completion.choices[0]?.message?.content ?? "" };
    } catch (err) {
      if (err instanceof OpenAI.APIConnectionTimeoutError || err instanceof OpenAI.APIUserAbortError)
        return { error: `a request timed out after ${timeoutMs / 1000} s` };
      if (err instanceof OpenAI.APIError && err.status !== undefined)
        return { error: `the endpoint answered HTTP ${err.status} (${err.message.slice(0, 200)})` };
      return { error: `the request failed: ${(err as Error).message}` };
    }
  }
}
