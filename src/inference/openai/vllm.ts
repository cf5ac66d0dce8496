/**
 * vLLM's token-id extensions of the OpenAI wire format, shared by the OpenAI-compatible client
 * and `nexrl serve`: request flags, the id fields of responses, and `token_id:<n>` token strings.
 *
 * @module
 */

/** Request fields that make a vLLM server report token ids. */
export interface VllmTokenIdRequestFields {
  /** Report `prompt_token_ids` and each choice's `token_ids` (vLLM ≥ 0.10.2). */
  return_token_ids?: boolean;
  /** Write logprob entries' `token` as `token_id:<n>` (older vLLM; needs `logprobs`). */
  return_tokens_as_token_ids?: boolean;
}

/**
 * Id fields vLLM adds with `return_token_ids`: on each `/v1/completions` choice both, on each
 * `/v1/chat/completions` choice `token_ids` (the prompt's ids are top-level there). Streaming
 * chunks carry the ids of their own tokens, and the first chunk the prompt's.
 */
export interface VllmTokenIdFields {
  /** Ids of the prompt as the model read it. */
  prompt_token_ids?: number[] | null;
  /** Ids of the generated tokens. */
  token_ids?: number[] | null;
}

const TOKEN_ID_STRING = /^token_id:(\d+)$/;

/** `token_id:<id>`, the token string of a logprob entry under `return_tokens_as_token_ids`. */
export function tokenIdString(id: number): string {
  return `token_id:${id}`;
}

/**
 * The ids of logprob token strings written as `token_id:<n>`, or undefined when any string is
 * not in that form (the server ignored `return_tokens_as_token_ids`).
 */
export function parseTokenIdStrings(tokens: readonly string[]): number[] | undefined {
  const ids: number[] = [];
  for (const token of tokens) {
    const match = TOKEN_ID_STRING.exec(token);
    if (!match) return undefined;
    ids.push(Number(match[1]));
  }
  return ids;
}
