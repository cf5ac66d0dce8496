/**
 * `nexrl serve` under load: how long `/health` takes to answer while another session's
 * forward_backward on `medium` runs, on the built CLI in a child process (the server's event loop
 * must not be the client's).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { reportRow, targetRow, type Row, type Suite } from "../lib/suite.js";

const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
/** The long operation: a forward_backward of `datums` × `positions` tokens on `model`. */
const LONG = { model: "medium", datums: 32, positions: 255 };
/** Pause between one health check's answer and the next check, in milliseconds. */
const HEALTH_INTERVAL_MS = 10;
/** The p99 of the health checks' latency, in milliseconds. */
const HEALTH_P99_LIMIT_MS = 100;

/** The `q` quantile (nearest rank) of `values`. */
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

/** Connection failures (a reset keep-alive connection) the client met and retried. */
let connectionFailures = 0;

/** `fetch`, sent again when the connection failed before an answer came (as a client's retry would). */
async function fetchRetrying(url: string, init?: RequestInit): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetch(url, init);
    } catch (error) {
      if (!(error instanceof TypeError) || attempt === 5) throw error;
      connectionFailures++;
    }
  }
}

async function post(url: string, route: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetchRetrying(`${url}${route}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${route} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
}

/** The result of Tinker future `requestId`, long-polled until it is ready. */
async function result(url: string, requestId: unknown): Promise<Record<string, unknown>> {
  for (;;) {
    const answer = await post(url, "/api/v1/retrieve_future", { request_id: requestId, allow_metadata_only: false });
    if (answer.type === "try_again") continue;
    if (typeof answer.error === "string") throw new Error(`the operation failed: ${answer.error}`);
    return answer;
  }
}

/** A cross-entropy datum of `n` positions over the bytes of the alphabet. */
function datum(n: number) {
  const t = Array.from({ length: n + 1 }, (_, i) => 97 + (i % 26));
  return {
    model_input: { chunks: [{ type: "encoded_text", tokens: t.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: { data: t.slice(1), dtype: "int64", shape: [n] },
      weights: { data: t.slice(1).map(() => 1), dtype: "float32", shape: [n] },
    },
  };
}

/** `nexrl serve --protocol tinker` in a child process, and its URL once it printed it. */
async function startServe(dir: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [CLI, "serve", "--protocol", "tinker", "--port", "0", "-o", dir], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /http:\/\/127\.0\.0\.1:\d+/.exec(out);
      if (match) resolve(match[0]);
    });
    child.on("exit", (code) => reject(new Error(`nexrl serve exited with code ${code} before printing its URL`)));
  });
  return { url, child };
}

/** A Tinker session with a model of `baseModel`, its engine built and warmed by one small step. */
async function trainingModel(url: string, baseModel: string): Promise<string> {
  const session = await post(url, "/api/v1/create_session", {
    tags: [],
    sdk_version: "0.25.0",
    type: "create_session",
  });
  const created = await post(url, "/api/v1/create_model", {
    session_id: session.session_id,
    model_seq_id: 0,
    base_model: baseModel,
    type: "create_model",
  });
  await result(url, created.request_id);
  const warm = await post(url, "/api/v1/forward_backward", {
    forward_backward_input: { data: [datum(16)], loss_fn: "cross_entropy" },
    model_id: created.model_id,
    seq_id: 1,
  });
  await result(url, warm.request_id);
  return created.model_id as string;
}

export const suite: Suite = {
  description: `nexrl serve: /health latency while another session runs a forward_backward of ${LONG.datums} × ${LONG.positions} tokens on ${LONG.model}`,
  async *run(ctx): AsyncIterable<Row> {
    const dir = await mkdtemp(path.join(tmpdir(), "nexrl-bench-serve-"));
    const { url, child } = await startServe(dir);
    try {
      ctx.log(`creating a ${LONG.model} model`);
      const modelId = await trainingModel(url, LONG.model);
      ctx.setup("health", {
        server: "node dist/cli/main.js serve --protocol tinker (default threads) in a child process",
        long_operation: `forward_backward of ${LONG.datums} datums of ${LONG.positions} positions (cross_entropy) on a ${LONG.model} model, after one warm-up step`,
        client: `GET /health one at a time, ${HEALTH_INTERVAL_MS} ms after each answer, from the first health check after the operation was submitted until its result arrived (Tinker retrieve_future long poll); a request whose connection failed (a reset keep-alive connection) is sent again, and its latency runs from the first attempt`,
        quantiles: "nearest rank",
      });
      ctx.log("timing /health during the long forward_backward");
      const loadAtStart = loadavg()[0];
      const started = performance.now();
      connectionFailures = 0;
      const submitted = await post(url, "/api/v1/forward_backward", {
        forward_backward_input: {
          data: Array.from({ length: LONG.datums }, () => datum(LONG.positions)),
          loss_fn: "cross_entropy",
        },
        model_id: modelId,
        seq_id: 2,
      });
      let finished = false;
      const done = result(url, submitted.request_id).finally(() => (finished = true));
      const latencies: number[] = [];
      while (!finished) {
        const t0 = performance.now();
        const health = await fetchRetrying(`${url}/health`);
        await health.arrayBuffer();
        latencies.push(performance.now() - t0);
        await new Promise((resolve) => setTimeout(resolve, HEALTH_INTERVAL_MS));
      }
      await done;
      const operationMs = performance.now() - started;
      ctx.setup("load_average_1min", { start: loadAtStart, end: loadavg()[0] });
      ctx.setup("health_latencies_ms", {
        slowest: [...latencies]
          .sort((a, b) => b - a)
          .slice(0, 10)
          .map((ms) => Math.round(ms * 10) / 10),
        over_10: latencies.filter((ms) => ms > 10).length,
        over_50: latencies.filter((ms) => ms > 50).length,
        over_100: latencies.filter((ms) => ms > 100).length,
      });
      yield targetRow(`serve_health_p99_during_forward_backward_${LONG.model}`, "ms", quantile(latencies, 0.99), {
        op: "<=",
        bound: HEALTH_P99_LIMIT_MS,
      });
      yield reportRow(`serve_health_p50_during_forward_backward_${LONG.model}`, "ms", quantile(latencies, 0.5));
      yield reportRow(`serve_health_checks_during_forward_backward_${LONG.model}`, "checks", latencies.length);
      yield reportRow(`serve_forward_backward_${LONG.model}_ms`, "ms", operationMs);
      yield reportRow(
        `serve_connection_failures_during_forward_backward_${LONG.model}`,
        "failures",
        connectionFailures,
      );
    } finally {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
      await rm(dir, { recursive: true, force: true });
    }
  },
};
