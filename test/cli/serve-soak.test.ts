/**
 * `nexrl serve` gives memory back: a soak of sessions created, used (training and sampling on a
 * `small` model) and abandoned on the real command in a child process. Each abandoned session
 * expires after `--session-timeout`, its model and sampling session are unloaded (requests for
 * them get 410), and the server's resident memory ends where it was after the warm-up.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ADAM, call, tinkerDatum, tinkerResult, tinkerSession } from "../support/server.js";

const TIMEOUT_SECONDS = 0.5;
const WARM_UP = 3;
const ROUNDS = 10;

const dir = await mkdtemp(path.join(tmpdir(), "nexrl-serve-soak-"));
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Resident memory of process `pid`, in MB (VmRSS of /proc/PID/status). */
async function residentMB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) / 1024;
}

/** One abandoned session: a `small` model trained a few steps, a sampling session of it sampled. */
async function useAndAbandon(url: string): Promise<{ modelId: string; samplerId: string }> {
  const { modelId } = await tinkerSession(url, "small");
  let seq = 1;
  for (let step = 0; step < 3; step++) {
    const data = [tinkerDatum(`the soak test trains step ${step} of a model it abandons`)];
    const fb = await call(url, "POST", "/api/v1/forward_backward", {
      forward_backward_input: { data, loss_fn: "cross_entropy" },
      model_id: modelId,
      seq_id: seq++,
    });
    const optim = await call(url, "POST", "/api/v1/optim_step", {
      adam_params: ADAM,
      model_id: modelId,
      seq_id: seq++,
      type: "optim_step",
    });
    expect((await tinkerResult(url, fb.body.request_id)).metrics["loss:sum"]).toBeGreaterThan(0);
    await tinkerResult(url, optim.body.request_id);
  }
  const saved = await call(url, "POST", "/api/v1/save_weights_for_sampler", {
    model_id: modelId,
    seq_id: seq++,
    sampling_session_seq_id: 1,
    type: "save_weights_for_sampler",
  });
  const samplerId = (await tinkerResult(url, saved.body.request_id)).sampling_session_id as string;
  const sampled = await call(url, "POST", "/api/v1/asample", {
    sampling_session_id: samplerId,
    seq_id: 0,
    num_samples: 4,
    prompt: { chunks: [{ type: "encoded_text", tokens: [256, 104, 105] }] },
    sampling_params: { max_tokens: 32, temperature: 1, top_k: -1, top_p: 1, seed: 1 },
    prompt_logprobs: false,
    topk_prompt_logprobs: 0,
    type: "sample",
  });
  expect((await tinkerResult(url, sampled.body.request_id)).sequences).toHaveLength(4);
  return { modelId, samplerId };
}

/** Waits until the abandoned session's model is refused with 410, and checks its sampler is too. */
async function expectExpired(url: string, ids: { modelId: string; samplerId: string }): Promise<void> {
  const info = () => call(url, "POST", "/api/v1/get_info", { model_id: ids.modelId, type: "get_info" });
  await expect.poll(async () => (await info()).status, { timeout: 10_000, interval: 50 }).toBe(410);
  expect((await info()).body).toMatchObject({
    error: "session_expired",
    message: expect.stringMatching(
      new RegExp(
        `model "${ids.modelId}" was unloaded: its session \\S+ expired after ${TIMEOUT_SECONDS} s without a heartbeat`,
      ),
    ),
  });
  const sample = await call(url, "POST", "/api/v1/asample", {
    sampling_session_id: ids.samplerId,
    seq_id: 1,
    num_samples: 1,
    prompt: { chunks: [{ type: "encoded_text", tokens: [256] }] },
    sampling_params: { max_tokens: 4, temperature: 1, top_k: -1, top_p: 1 },
    prompt_logprobs: false,
    topk_prompt_logprobs: 0,
    type: "sample",
  });
  expect([sample.status, sample.body.error]).toEqual([410, "session_expired"]);
}

describe("nexrl serve under a soak of abandoned sessions", () => {
  it("expires each one, unloads its models, and ends within 10 % of its memory after the warm-up", async () => {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        path.resolve("src/cli/main.ts"),
        "serve",
        "--protocol",
        "tinker",
        "--port",
        "0",
        "--threads",
        "2",
        "--session-timeout",
        String(TIMEOUT_SECONDS),
        "-o",
        dir,
      ],
      { cwd: path.resolve("."), stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
    try {
      await expect.poll(() => out, { timeout: 30_000, interval: 50 }).toMatch(/http:\/\/127\.0\.0\.1:\d+/);
      const url = /http:\/\/127\.0\.0\.1:\d+/.exec(out)![0];
      expect(out).toMatch(`sessions expire after ${TIMEOUT_SECONDS} s without a heartbeat`);
      const rss: number[] = [];
      for (let round = 0; round < WARM_UP + ROUNDS; round++) {
        await expectExpired(url, await useAndAbandon(url));
        // The 410 comes as soon as the session is unloaded; its engine threads stop and the
        // collection that frees its storage runs just after.
        await new Promise((resolve) => setTimeout(resolve, 300));
        rss.push(await residentMB(child.pid!));
      }
      const start = rss[WARM_UP - 1]!;
      console.log(`nexrl serve soak: resident MB after each round ${rss.map((r) => r.toFixed(0)).join(", ")}`);
      // Freed engine memory leaves the process when the last thread's collection has run, which
      // on a busy machine can come seconds after the 410: the end is the settled figure.
      await expect
        .poll(() => residentMB(child.pid!), { timeout: 15_000, interval: 250 })
        .toBeLessThanOrEqual(start * 1.1);
      const expiries = err.match(
        /^nexrl serve: session \S+ expired after 0\.5 s without a heartbeat; unloaded 1 model \(\S+:train:0\) and 1 sampling session \(\S+:sample:1\), freeing \d+ MB$/gm,
      );
      expect(expiries).toHaveLength(WARM_UP + ROUNDS);
    } finally {
      child.kill("SIGKILL");
    }
  }, 240_000);
});
