/**
 * The engine host thread: builds one engine (or snapshot sampler) and answers the calls its
 * {@link "./engine-host.js".HostedEngine} posts, each as soon as it arrives, as the engine
 * would answer them on the calling thread. The engine computes here, on its own thread pool.
 *
 * @module
 * @internal
 */
import type { MessagePort } from "node:worker_threads";
import { LocalEngine } from "./engine.js";
import type { LocalSampler } from "./sampler.js";
import { encodeError, type HostReply, type HostRequest, type HostSubject } from "./host-protocol.js";
import { EngineError } from "../errors.js";

type Subject = LocalEngine | LocalSampler;

async function build(subject: HostSubject): Promise<Subject> {
  return subject.kind === "engine"
    ? LocalEngine.create(subject.options)
    : await LocalEngine.samplerFromSnapshot(subject.path, subject.compute);
}

/** Posts `reply`; an error whose fields cannot be copied goes without them. */
function post(port: MessagePort, reply: HostReply): void {
  try {
    port.postMessage(reply);
  } catch (err) {
    if (reply.ok) port.postMessage({ id: reply.id, ok: false, error: encodeError(err) } satisfies HostReply);
    else port.postMessage({ ...reply, error: { ...reply.error, fields: {} } } satisfies HostReply);
  }
}

/** Serves the calls arriving on `port`. */
export function serveEngineHost(port: MessagePort): void {
  let subject: Promise<Subject> | undefined;
  port.on("message", (request: HostRequest) => {
    const { id } = request;
    const answer = async (): Promise<unknown> => {
      if ("subject" in request) {
        subject = build(request.subject);
        return (await subject).config;
      }
      if (!subject)
        throw new EngineError("the engine host received a call before its engine was built", { code: "thread" });
      const target = (await subject) as unknown as Record<string, (...args: unknown[]) => unknown>;
      const method = target[request.method];
      if (typeof method !== "function")
        throw new EngineError(`a snapshot sampler has no ${request.method}; it only samples and scores`, {
          code: "thread",
        });
      return await method.apply(target, request.args);
    };
    answer().then(
      (value) => post(port, { id, ok: true, value }),
      (error: unknown) => post(port, { id, ok: false, error: encodeError(error) }),
    );
  });
}
