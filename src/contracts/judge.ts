/**
 * What an LLM judge is configured with (the math worker's `judge:` in a recipe, or `new LlmJudge(...)`).
 * @module
 */

/** Options of an LLM judge (`LlmJudge`): its endpoint, model, rubrics and limits. */
export interface LlmJudgeOptions {
  /** Base URL of the OpenAI-compatible API (`…/v1`). */
  baseUrl: string;
  /** The judge model's name on that endpoint. */
  model: string;
  /** The API key (never logged nor put in errors); default `EMPTY`. */
  apiKey?: string;
  /** The prompt template of {@link "nexrl".LlmJudge.score | LlmJudge.score}: `{{prompt}}`, `{{response}}`, `{{ground_truth}}`. */
  scoreRubric: string;
  /** The prompt template of {@link "nexrl".LlmJudge.rank | LlmJudge.rank}: `{{prompt}}`, `{{responses}}`, `{{ground_truth}}`, `{{n}}`. */
  rankRubric: string;
  /** Sampling temperature (default 0). */
  temperature?: number;
  /** Most tokens per reply (default 512). */
  maxTokens?: number;
  /** Requests in flight at once (default 8). */
  maxConcurrency?: number;
  /** Milliseconds per request (default 60 000). */
  timeoutMs?: number;
  /** Retries after a failed attempt (default 2). */
  maxRetries?: number;
  /** Milliseconds before the first retry, doubled for each next one (default 250). */
  retryDelayMs?: number;
  /** Reuse the verdict of an identical prompt (default true). */
  cache?: boolean;
}
