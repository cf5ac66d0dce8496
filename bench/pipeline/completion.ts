/** The one completion of the rollout-throughput row: what the loopback server answers and what both clients send. */

/** The prompt every rollout sends, as token ids (so no tokenizer work is timed). */
export const PROMPT_TOKENS: readonly number[] = Array.from({ length: 32 }, (_, i) => 1000 + i);
/** The tokens every answer holds. */
export const RESPONSE_TOKENS: readonly number[] = Array.from({ length: 16 }, (_, i) => 2000 + i);

/** The `/v1/completions` answer, with vLLM's `return_token_ids` fields and `token_id:<n>` logprob tokens. */
export function completionBody(): string {
  return JSON.stringify({
    id: "cmpl-bench",
    object: "text_completion",
    created: 0,
    model: "bench",
    choices: [
      {
        index: 0,
        text: "x".repeat(RESPONSE_TOKENS.length),
        logprobs: {
          tokens: RESPONSE_TOKENS.map((t) => `token_id:${t}`),
          token_logprobs: RESPONSE_TOKENS.map((_, i) => -0.01 * (i + 1)),
          top_logprobs: null,
          text_offset: null,
        },
        finish_reason: "stop",
        prompt_token_ids: PROMPT_TOKENS,
        token_ids: RESPONSE_TOKENS,
      },
    ],
    usage: {
      prompt_tokens: PROMPT_TOKENS.length,
      completion_tokens: RESPONSE_TOKENS.length,
      total_tokens: PROMPT_TOKENS.length + RESPONSE_TOKENS.length,
    },
  });
}
