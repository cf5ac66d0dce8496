/**
 * {@link ResponseStore}: the responses a server keeps for `previous_response_id`,
 * `item_reference` and `GET`/`DELETE /v1/responses/{id}`, bounded so that a long-lived server
 * does not grow.
 * @module
 */
import type { ChatMessage } from "../wire/tokenizer.js";
import type { ResponseObject, ResponseOutputItem } from "./responses-protocol.js";

/** A stored response and the conversation a follow-up continues. */
export interface StoredResponse {
  /** The response as answered. */
  response: ResponseObject;
  /** The conversation it answered (without its instructions, which a follow-up does not inherit) and its answer. */
  conversation: ChatMessage[];
}

/** Responses kept by default: the most recently used ones. */
export const STORED_RESPONSES = 1000;

/**
 * The last `capacity` responses stored, least recently used dropped first, and their output
 * items by id.
 */
export class ResponseStore {
  private readonly responses = new Map<string, StoredResponse>();
  private readonly items = new Map<string, ResponseOutputItem>();

  /** @param capacity most responses kept. */
  constructor(readonly capacity = STORED_RESPONSES) {}

  /** Responses stored now. */
  get size(): number {
    return this.responses.size;
  }

  /** The stored response `id` (now the most recently used), or undefined. */
  get(id: string): StoredResponse | undefined {
    const stored = this.responses.get(id);
    if (stored) {
      this.responses.delete(id);
      this.responses.set(id, stored);
    }
    return stored;
  }

  /** An output item of a stored response, by its id. */
  item(id: string): ResponseOutputItem | undefined {
    return this.items.get(id);
  }

  /** Stores `stored`, dropping the least recently used response past the capacity. */
  put(stored: StoredResponse): void {
    this.delete(stored.response.id);
    this.responses.set(stored.response.id, stored);
    for (const item of stored.response.output) if (item.id) this.items.set(item.id, item);
    if (this.responses.size > this.capacity) this.delete(this.responses.keys().next().value!);
  }

  /** Forgets response `id`; false when it was not stored. */
  delete(id: string): boolean {
    const stored = this.responses.get(id);
    if (!stored) return false;
    this.responses.delete(id);
    for (const item of stored.response.output) if (item.id) this.items.delete(item.id);
    return true;
  }
}
