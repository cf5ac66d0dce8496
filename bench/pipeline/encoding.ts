/**
 * Row 1 of the pipeline suite: the Tinker client's request encoding — datums (built from
 * trajectories by `trajectoryToDatum` before the timed calls) → `forward_backward` request bodies,
 * checked against the loss contract and serialised by `TinkerTrainingClient` as for a real
 * service — against `JSON.stringify` of the same bodies pre-built as plain objects (the limit).
 * Building the datums is timed on its own, for the suite's `setup`.
 */
import { DEFAULT_BACKOFF } from "../../dist/http/backoff.js";
import { HttpTransport, requestBodyText, type HttpRequest, type HttpResponse } from "../../dist/http/transport.js";
import { seededRandom } from "../../dist/data/seed.js";
import { trajectoryToDatum } from "../../dist/algorithms/datums.js";
import { DEFAULT_CHUNK_LIMITS } from "../../dist/backends/tinker/chunks.js";
import { negotiate } from "../../dist/backends/tinker/generation.js";
import { TinkerTrainingClient } from "../../dist/backends/tinker/training-client.js";
import type { LossFunctionName } from "../../dist/contracts/losses.js";
import { Trajectory } from "../../dist/contracts/trajectory.js";

/** The loss of an RL step: datums carry target tokens, sampler logprobs and advantages. */
export const LOSS_FN: LossFunctionName = "importance_sampling";
/** Share of each trajectory that is prompt (loss mask 0). */
const PROMPT_SHARE = 0.1;

/**
 * `count` trajectories of `length` tokens shaped like sampler output: vocabulary-sized ids,
 * float32 logprobs (as vLLM and Tinker report them), a GRPO-like scalar advantage. The arrays are
 * packed, as those built from parsed JSON are.
 */
function makeTrajectories(count: number, length: number): Trajectory[] {
  const next = seededRandom(count * length);
  const prompt = Math.round(length * PROMPT_SHARE);
  const trajectories: Trajectory[] = [];
  for (let i = 0; i < count; i++) {
    const tokens: number[] = [];
    const lossMask: number[] = [];
    const logprobs: number[] = [];
    for (let j = 0; j < length; j++) {
      tokens.push(Math.floor(next() * 151_000));
      lossMask.push(j < prompt ? 0 : 1);
      logprobs.push(j < prompt ? 0 : Math.fround(Math.log(next() + 1e-6)));
    }
    const advantage = i % 2 === 0 ? 0.8660254037844386 : -0.8660254037844386;
    trajectories.push(
      new Trajectory({
        tokens,
        lossMask,
        logprobs,
        reward: i % 2,
        advantage,
        groupId: "0-0",
        runId: i,
        policyVersion: 0,
      }),
    );
  }
  return trajectories;
}

/**
 * The transport with the network cut off: it takes each body as `HttpTransport.request` does
 * (`requestBodyText`: the bytes the client serialised) and answers the submission at once, so
 * that the client's own work — datum checks, chunking and serialisation — is all that is timed.
 */
class EncodingTransport extends HttpTransport {
  /** Receives the serialised bodies while set (only outside the timed calls: keeping bodies alive would add garbage-collector work the real transport does not have). */
  capture: string[] | undefined;
  private nextId = 0;

  override async request<T>(request: HttpRequest): Promise<HttpResponse<T>> {
    const body = requestBodyText(request)!;
    this.capture?.push(typeof body === "string" ? body : Buffer.from(body).toString("utf8"));
    return { status: 200, headers: {}, body: { request_id: `req-${this.nextId++}` } as T };
  }
}

/** Both contenders for one trajectory length, and the datum building before them. */
export interface EncodingBench {
  /** Each trajectory's datum → its `forward_backward` request body, one request per trajectory; returns the tokens encoded. */
  ours(): Promise<number>;
  /** `trajectoryToDatum` of every trajectory (the datums `ours` sends were built so once); returns the tokens. */
  datums(): number;
  /** `JSON.stringify` of the same request bodies, pre-built as plain objects; returns the tokens. */
  limit(): number;
  /** Bytes of the bodies of one call. */
  bytes: number;
  close(): Promise<void>;
}

/** Sets up {@link EncodingBench} for `count` trajectories of `length` tokens, checking that both sides produce the same bytes. */
export async function encodingBench(count: number, length: number): Promise<EncodingBench> {
  const trajectories = makeTrajectories(count, length);
  const tokens = count * length;
  const http = new EncodingTransport({ baseUrl: "http://127.0.0.1:9", apiKey: "bench" });
  const closed = new AbortController();
  const client = new TinkerTrainingClient(
    {
      http,
      sessionId: "bench",
      limits: DEFAULT_CHUNK_LIMITS,
      pollTimeoutMs: 1000,
      maxRetries: 0,
      backoff: DEFAULT_BACKOFF,
      closed: closed.signal,
      log: undefined,
      negotiation: negotiate("json", {}),
      request: (request) => http.request(request),
    },
    "bench-model",
    "bench-base",
  );
  const toDatum = (t: Trajectory) => trajectoryToDatum(t, { lossFn: LOSS_FN, backend: "tinker" })!;
  const datums = trajectories.map(toDatum);
  const ours = async (): Promise<number> => {
    for (const d of datums) await client.forwardBackward([d], LOSS_FN);
    return tokens;
  };
  const bodies: string[] = [];
  http.capture = bodies;
  await ours();
  http.capture = undefined;
  // The limit's plain objects: the bodies just sent, parsed back (fresh arrays of plain numbers).
  // They differ from later calls' bodies only in seq_id.
  const plain = bodies.map((b) => JSON.parse(b) as unknown);
  if (plain.map((p) => JSON.stringify(p)).join("") !== bodies.join(""))
    throw new Error("the pre-built bodies do not serialise to the bytes the client sent");
  return {
    ours,
    datums: () => {
      for (const t of trajectories) toDatum(t);
      return tokens;
    },
    limit: () => {
      for (const p of plain) JSON.stringify(p);
      return tokens;
    },
    bytes: bodies.reduce((n, b) => n + Buffer.byteLength(b), 0),
    close: async () => {
      closed.abort();
      await http.close();
    },
  };
}
