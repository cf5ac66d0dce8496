/**
 * API-key authentication of `nexrl serve`. Each protocol's clients send the key in their own
 * header — Tinker's SDK and Anthropic's `X-API-Key`, Weaver's `X-WEAVER-API-KEY`, OpenAI clients
 * `Authorization: Bearer` — and the same client may call several protocols (a Tinker run samples
 * through the OpenAI endpoints), so every route accepts the key in any of the three.
 *
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { speaksOpenAI, type RequestHandler } from "./handler.js";
import { requestPath, sendJson } from "./io.js";
import { sendAnthropicError } from "./anthropic-protocol.js";
import { sendOpenAIError } from "./openai-protocol.js";
import { ProtocolError } from "../errors.js";

/** The headers a key is read from, as clients send them. */
export const API_KEY_HEADERS = ["X-API-Key", "X-WEAVER-API-KEY", "Authorization: Bearer"] as const;

const BEARER = /^Bearer\s+(.+)$/i;

/** The keys a request presents, in any of {@link API_KEY_HEADERS}. */
function presentedKeys(req: IncomingMessage): string[] {
  const keys: string[] = [];
  for (const name of ["x-api-key", "x-weaver-api-key"]) {
    const value = req.headers[name];
    if (typeof value === "string") keys.push(value.trim());
  }
  const bearer = BEARER.exec(req.headers.authorization ?? "")?.[1];
  if (bearer !== undefined) keys.push(bearer.trim());
  return keys;
}

/** SHA-256 digests compared in constant time: neither the key's bytes nor its length leak through timing. */
function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** True when `req` presents `apiKey` in one of {@link API_KEY_HEADERS}. */
export function presentsApiKey(req: IncomingMessage, apiKey: string): boolean {
  const expected = digest(apiKey);
  return presentedKeys(req).some((key) => timingSafeEqual(digest(key), expected));
}

/**
 * A handler that answers 401 to every request lacking `apiKey` and not accepted by `alsoAccepts`
 * (such as a Tinker JWT exchanged for the key; put it after the handlers that stay open, such as health), in the error shape of the client's protocol: Anthropic's
 * `{type: "error", error: {type: "authentication_error", message}}` under `/v1/messages`, OpenAI's
 * `{error: {message, type, param, code}}` for another OpenAI client (a path under `/v1/` or an OpenAI SDK's User-Agent), `{error, message, retryable}` otherwise.
 * The key is never echoed.
 */
export function apiKeyGate(apiKey: string, alsoAccepts?: (req: IncomingMessage) => boolean): RequestHandler {
  const message = `missing or wrong API key: this server was started with an API key (--api-key or NEXRL_SERVE_API_KEY); send it in ${API_KEY_HEADERS.join(", ")}`;
  return async (req, res) => {
    if (presentsApiKey(req, apiKey) || alsoAccepts?.(req) === true) return false;
    // The body is not read; the connection is closed after the answer rather than drained.
    const headers = { "www-authenticate": 'Bearer realm="nexrl serve"', connection: "close" };
    const path = requestPath(req);
    const unauthorized = new ProtocolError(message, {
      status: 401,
      code: "invalid_api_key",
      openaiType: "invalid_request_error",
    });
    if (/^\/v1\/messages(\/|$)/.test(path)) sendAnthropicError(res, unauthorized, headers);
    else if (speaksOpenAI(req)) sendOpenAIError(res, unauthorized, headers);
    else sendJson(res, 401, { error: "unauthorized", message, retryable: false }, headers);
    return true;
  };
}
