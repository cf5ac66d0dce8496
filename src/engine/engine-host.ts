/**
 * {@link HostedEngine}: a {@link LocalEngine} (or a snapshot's {@link LocalSampler}) that lives
 * in a worker thread of its own, an engine host, and is called from here by message passing.
 *
 * The engine's API is synchronous and its calling thread takes a share of the work, then waits
 * for its thread pool; in the host, that thread is the host's, so the thread that owns the
 * proxy (a server's event loop) stays free to answer other requests while the engine computes.
 * The engine inside is the one the calling thread would build, with the same thread count, so
 * every result is the same bit for bit; errors arrive as the same classes with the same messages
 * and fields.
 *
 * @module
 * @internal
 */
import { Worker } from "node:worker_threads";
import type { ForwardBackwardOutput, OptimStepOutput, SampleOutput, SamplingParams } from "../wire/results.js";
import type { AdamParams, Datum } from "../wire/wire.js";
import { resolveModelConfig, type ResolvedModelConfig } from "./config.js";
import type { LocalEngineOptions, StateOptions } from "./engine.js";
import { resolveLora } from "./lora.js";
import { decodeError, type HostMethod, type HostReply, type HostRequest, type HostSubject } from "./host-protocol.js";
import { threadCount, type ComputeOptions } from "./runtime.js";
import { ByteTokenizer } from "./tokenizer.js";
import { workerModule } from "./worker-module.js";
import { EngineError } from "../errors.js";

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/**
 * The host's entry, in a `data:` URL (so that no flag of the parent changes how it is read): it
 * imports `engine-host-worker` (after tsx's loader when run from the sources) and serves; a host
 * that cannot import it fails its first call with the reason.
 */
function bootstrapUrl(): URL {
  const { entry, register } = workerModule(import.meta.url, "engine-host-worker");
  const source = `import { parentPort } from "node:worker_threads";
let started;
try {
  ${register}
  (await import(${JSON.stringify(entry)})).serveEngineHost(parentPort);
  started = true;
} catch (err) {
  const message = "the engine host thread failed to start: " + String((err && err.stack) || err);
  parentPort.on("message", (request) => parentPort.postMessage({ id: request.id, ok: false, error: { name: "EngineError", message, stack: undefined, fields: { problem: "thread" } } }));
}
`;
  return new URL(`data:text/javascript,${encodeURIComponent(source)}`);
}

let entry: URL | undefined;

/**
 * An engine, or a snapshot's sampler, in an engine host thread: the methods of
 * {@link LocalEngine} that compute, as promises. Calls run in the host as they arrive, as they
 * would on one thread; order the ones that must not overlap (training calls) as with the engine
 * itself. {@link HostedEngine.close} ends the thread, which gives back all its memory.
 */
export class HostedEngine {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  /** The calls not yet answered (closing waits for them). */
  private readonly calls = new Set<Promise<unknown>>();
  private nextId = 1;
  /** Why the host cannot answer any more (it was closed, or its thread ended). */
  private ended: Error | undefined;
  private closing: Promise<void> | undefined;
  /** Resolves once the host built its engine; rejects with the reason it could not. */
  readonly ready: Promise<void>;
  /** The model's resolved shape (known before the host has built it, for an engine). */
  config: ResolvedModelConfig;
  /** Number of threads the engine computes with (the host's own counts as one). */
  readonly threads: number;

  private constructor(subject: HostSubject, config: ResolvedModelConfig | undefined) {
    this.threads = threadCount(subject.kind === "engine" ? subject.options : subject.compute);
    entry ??= bootstrapUrl();
    this.worker = new Worker(entry, {
      // As the engine's pool workers: a loader the parent was started with stays out.
      execArgv: [],
      name: "nexrl-engine-host",
    });
    this.worker.unref();
    this.worker.on("message", (reply: HostReply) => this.settle(reply));
    this.worker.on("error", (error) => this.end(error));
    this.worker.on("exit", (code) => this.end(new Error(`it exited with code ${code}`)));
    this.config = config!;
    this.ready = this.send({ id: 0, subject }).then((value) => {
      this.config = value as ResolvedModelConfig;
    });
    // A host nobody calls must not fail the process with an unhandled rejection; calls see the error.
    this.ready.catch(() => undefined);
  }

  /**
   * A host building an engine of `options` (see {@link LocalEngine.create}). The shape and the
   * thread count are checked here, at once; the host's other failures reject
   * {@link HostedEngine.ready} and every call.
   * @throws {@link "nexrl".ConfigError | ConfigError} for an unknown preset, an invalid shape,
   * invalid `threads` or an invalid `lora`.
   */
  static create(options: LocalEngineOptions): HostedEngine {
    const config = resolveModelConfig(options.model, new ByteTokenizer().vocabSize);
    if (options.lora !== undefined) resolveLora(options.lora, config);
    return new HostedEngine({ kind: "engine", options }, config);
  }

  /**
   * A host serving the sampler of a snapshot file (see {@link LocalEngine.samplerFromSnapshot}),
   * once it has read it.
   * @throws EngineError when the file is missing, foreign, truncated or corrupt.
   */
  static async samplerFromSnapshot(path: string, compute: ComputeOptions = {}): Promise<HostedEngine> {
    const host = new HostedEngine({ kind: "snapshot", path, compute }, undefined);
    try {
      await host.ready;
    } catch (error) {
      await host.close();
      throw error;
    }
    return host;
  }

  /** {@link LocalEngine.forward}, in the host. */
  forward(
    datums: readonly Datum[],
    lossFn: string,
    lossFnConfig?: Readonly<Record<string, number>>,
  ): Promise<ForwardBackwardOutput> {
    return this.call("forward", datums, lossFn, lossFnConfig);
  }

  /** {@link LocalEngine.forwardBackward}, in the host. */
  forwardBackward(
    datums: readonly Datum[],
    lossFn: string,
    lossFnConfig?: Readonly<Record<string, number>>,
  ): Promise<ForwardBackwardOutput> {
    return this.call("forwardBackward", datums, lossFn, lossFnConfig);
  }

  /** {@link LocalEngine.optimStep}, in the host. */
  optimStep(adam: AdamParams): Promise<OptimStepOutput> {
    return this.call("optimStep", adam);
  }

  /** {@link LocalEngine.sampleAsync} (or the snapshot sampler's), in the host. */
  sampleAsync(promptTokens: readonly number[], options: SamplingParams, numSamples = 1): Promise<SampleOutput> {
    return this.call("sampleAsync", promptTokens, options, numSamples);
  }

  /** {@link LocalEngine.computeLogprobs} (or the snapshot sampler's), in the host. */
  computeLogprobs(tokens: readonly number[]): Promise<(number | null)[]> {
    return this.call("computeLogprobs", tokens);
  }

  /** {@link LocalEngine.saveState}, in the host. */
  saveState(name: string, options: StateOptions): Promise<string> {
    return this.call("saveState", name, options);
  }

  /** {@link LocalEngine.loadState}, in the host. */
  loadState(path: string, options: StateOptions): Promise<void> {
    return this.call("loadState", path, options);
  }

  /** {@link LocalEngine.saveWeightsForSampler}, in the host. */
  saveWeightsForSampler(name: string): Promise<string> {
    return this.call("saveWeightsForSampler", name);
  }

  /**
   * Waits for the calls already made, closes the engine and ends the host thread, giving back
   * its memory. Later calls fail with {@link "nexrl".EngineError | EngineError} `closed`. Idempotent.
   */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      await Promise.allSettled(this.calls);
      if (!this.ended) await this.send({ id: this.nextId++, method: "close", args: [] }).catch(() => undefined);
      this.ended ??= closedError();
      await this.worker.terminate();
    })());
  }

  private call<T>(method: HostMethod, ...args: unknown[]): Promise<T> {
    if (this.closing) return Promise.reject(closedError());
    const call = this.send({ id: this.nextId++, method, args });
    this.calls.add(call);
    const forget = (): void => void this.calls.delete(call);
    call.then(forget, forget);
    return call as Promise<T>;
  }

  private send(request: HostRequest): Promise<unknown> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(request.id, { resolve, reject });
      this.worker.postMessage(request);
    });
  }

  private settle(reply: HostReply): void {
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.ok) pending.resolve(reply.value);
    else pending.reject(decodeError(reply.error));
  }

  /** Fails every call waiting and every later one: the host thread is gone. */
  private end(cause: Error): void {
    this.ended ??= new EngineError(
      `the engine host thread ended (${cause.message}); the model's state there is lost, create it again (load its last checkpoint to continue)`,
      { code: "thread", workerStack: cause.stack },
    );
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const p of waiting) p.reject(this.ended);
  }
}

function closedError(): EngineError {
  return new EngineError("this engine (or sampler) was closed; create a new one to compute again", { code: "closed" });
}
