import type { Dispatcher } from "undici";
import type { Connections } from "../../src/http/pools.js";
import { dispatchText, type TextAnswer } from "../../src/http/text-dispatch.js";

/** {@link dispatchText} with its outcome as a promise, and its abort. */
export function exchange(
  connections: Connections,
  options: Dispatcher.DispatchOptions,
): { answer: Promise<TextAnswer>; abort(reason: Error): void } {
  let receiver!: { textAnswered(answer: TextAnswer): void; textFailed(error: Error): void };
  const answer = new Promise<TextAnswer>(
    (resolve, reject) => (receiver = { textAnswered: resolve, textFailed: reject }),
  );
  const sent = dispatchText(connections, options, receiver);
  return { answer, abort: (reason) => sent.abort(reason) };
}
