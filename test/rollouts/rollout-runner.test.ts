import { describe, expect, it } from "vitest";
import { BaseRolloutWorker } from "../../src/contracts/rollout-worker.js";
import { RolloutRunner, type RolloutFailure } from "../../src/rollouts/runner.js";
import type { FailurePolicy } from "../../src/rollouts/failure-policy.js";
import type { RolloutTask } from "../../src/contracts/task.js";
import type { RolloutWorkerContext } from "../../src/contracts/worker.js";
import { SamplerInferenceClient, type InferenceClient, type InferenceResult } from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import type { RecipeConfig } from "../../src/recipe/index.js";
import { runGuarded } from "../../src/rollouts/run-guard.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { task, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { InputError, RolloutError, UserCodeError } from "../../src/errors.js";
import { workerSettings } from "../../src/recipe/settings.js";

async function recipeConfig(): Promise<RecipeConfig> {
  const dir = await tempDir();
  await writeJsonl(`${dir}/train.jsonl`, [{ prompt: "x" }]);
  const yaml = `data: {data_files: [train.jsonl], rollout_repeat_n: 2}\nrollout_worker: {type: custom, custom_rollout_worker_module_path: train.jsonl}\ntrainer: {type: remote_api_grpo, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n`;
  return (await writeRecipe(dir, yaml)).config;
}

async function inference(): Promise<SamplerInferenceClient> {
  const service = new LocalTrainingService({ outputDir: await tempDir(), seed: 3 });
  return new SamplerInferenceClient({
    tokenizer: new ByteTokenizer(),
    samplingClient: await service.createSamplingClient("tiny"),
    policyVersion: 4,
  });
}

/** The "Custom RolloutWorker" of the Weaver guide, written in TypeScript: it sets no logprobs. */
class MyTaskWorker extends BaseRolloutWorker {
  async rollout(task: RolloutTask) {
    const prompt = String(task.data.prompt);
    const answer = String(task.data.answer ?? "");
    const completion = await this.inferenceClient.completion(prompt);
    const { promptTokens, responseTokens, response } = completion;
    const reward = response.trim() === answer ? 1 : 0;
    const trajectory = new Trajectory({
      tokens: [...promptTokens, ...responseTokens],
      lossMask: [...promptTokens.map(() => 0), ...responseTokens.map(() => 1)],
      reward,
      extraFields: { response, answer },
    });
    return this.putTrajectory(trajectory);
  }
}

/** A worker whose behaviour each test sets. */
function scripted(behaviour: (worker: BaseRolloutWorker, task: RolloutTask, attempt: number) => unknown) {
  const attempts = new Map<string, number>();
  const created: BaseRolloutWorker[] = [];
  class Scripted extends BaseRolloutWorker {
    constructor(context: RolloutWorkerContext) {
      super(context);
      created.push(this);
    }
    async rollout(task: RolloutTask) {
      const key = `${task.groupId}/${task.runId}`;
      const n = attempts.get(key) ?? 0;
      attempts.set(key, n + 1);
      return (await behaviour(this, task, n)) as Trajectory;
    }
    put(t: Trajectory): void {
      this.putTrajectory(t);
    }
  }
  return { Scripted, created };
}

const ok = () => new Trajectory({ tokens: [1, 2, 3], lossMask: [0, 1, 1], reward: 1 });

async function runner(
  workerClass: new (c: RolloutWorkerContext) => BaseRolloutWorker,
  policy: FailurePolicy,
  extra: {
    timeoutMs?: number;
    numWorkers?: number;
    inference?: SamplerInferenceClient;
    onFailure?: (failure: RolloutFailure) => void;
  } = {},
) {
  const recipe = await recipeConfig();
  return new RolloutRunner({
    createWorker: (slot) =>
      new workerClass({
        name: `rollout_worker-${slot}`,
        settings: workerSettings(recipe),
        tokenizer: new ByteTokenizer(),
      }),
    numWorkers: extra.numWorkers ?? 2,
    timeoutMs: extra.timeoutMs ?? 0,
    policy,
    ...(extra.inference && { inference: extra.inference }),
    sampling: { temperature: 1, maxTokens: 6 },
    maxSequenceLength: 40,
    currentVersion: () => 7,
    ...(extra.onFailure && { onFailure: extra.onFailure }),
  });
}

describe("RolloutRunner", () => {
  it("runs the seed example worker unchanged: sampled with the rollout's seed, stamped with its group, run and policy version", async () => {
    const client = await inference();
    const r = await runner(MyTaskWorker, { mode: "fail_fast" }, { inference: client });
    const t = task({ data: { prompt: "What is 1 + 1?", answer: "2" }, groupId: "0-5", runId: 2, seed: 11 });
    const [first, again, other] = await Promise.all([r.run(t), r.run(t), r.run({ ...t, seed: 12 })]);
    const traj = first.trajectories[0]!;
    expect(first).toMatchObject({ status: "ok", attempts: 1 });
    expect(traj).toMatchObject({ groupId: "0-5", runId: 2, policyVersion: 4, isVal: false, logprobs: undefined });
    expect(traj.lossMask.filter((m) => m === 1)).toHaveLength(
      traj.tokens.length - client.tokenizer.encode("What is 1 + 1?", { addBos: true }).length,
    );
    expect(again.trajectories[0]!.tokens).toEqual(traj.tokens);
    expect(other.trajectories[0]!.tokens).not.toEqual(traj.tokens);
    expect(r.takeCounts()).toEqual({
      succeeded: 3,
      failed: 0,
      retried: 0,
      timedOut: 0,
      skipped: 0,
      unknownTokenIds: 0,
    });
  });

  it("fail_fast stops at the first failure with an error naming the rollout and what to do", async () => {
    const { Scripted } = scripted(() => {
      throw new Error("boom");
    });
    const r = await runner(Scripted, { mode: "fail_fast" });
    const error = await r.run(task({ index: 3, groupId: "0-3", runId: 1 })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RolloutError);
    // The error came from code in this file: it is named, and no retry is suggested.
    expect((error as RolloutError).message).toMatch(
      new RegExp(
        `^rollout of row 4 \\(group 0-3, run 1\\) failed after 1 attempt\\(s\\): Error: boom\n    at ${import.meta.filename}:\\d+:\\d+\n(    at .*\n)*A retry would fail the same way: fix the code above, then run again \\(nexrl --verbose or NEXRL_DEBUG=1 prints the whole stack\\)$`,
      ),
    );
    expect((error as RolloutError).origin).toEqual({ index: 3, groupId: "0-3", runId: 1, isVal: false });
    expect(((error as RolloutError).cause as Error).message).toBe("boom");
  });

  it("shows a thrown value that is not an Error as its JSON, not [object Object]", async () => {
    const { Scripted } = scripted(() => {
      throw { code: "E_QUOTA", detail: { left: 0 } };
    });
    const r = await runner(Scripted, { mode: "fail_fast" });
    const error = await r.run(task({ index: 0, groupId: "0-0", runId: 0 })).catch((e: unknown) => e);
    expect((error as RolloutError).message).toContain(
      'failed after 1 attempt(s): a throw of {"code":"E_QUOTA","detail":{"left":0}}',
    );
  });

  it("retry runs a failing rollout again, then stops when the retries are used up", async () => {
    const flaky = scripted(async (_, __, attempt) => {
      if (attempt < 2) throw new Error(`flake ${attempt}`);
      return ok();
    });
    const r = await runner(flaky.Scripted, { mode: "retry", retries: 2 });
    expect(await r.run(task())).toMatchObject({ status: "ok", attempts: 3 });
    expect(r.takeCounts()).toEqual({
      succeeded: 1,
      failed: 2,
      retried: 2,
      timedOut: 0,
      skipped: 0,
      unknownTokenIds: 0,
    });
    const strict = await runner(
      scripted(async (_, __, attempt) => {
        throw new Error(`flake ${attempt}`);
      }).Scripted,
      { mode: "retry", retries: 1 },
    );
    await expect(strict.run(task())).rejects.toThrow(/failed after 2 attempt\(s\): Error: flake 1\n/);
    // A timeout could pass on another try: the hint to keep going stays.
    const slow = await runner(
      scripted(() => new Promise(() => undefined)).Scripted,
      { mode: "retry", retries: 1 },
      { timeoutMs: 20 },
    );
    await expect(slow.run(task())).rejects.toThrow(
      /failed after 2 attempt\(s\): .*took longer than rollout_worker\.rollout_timeout_seconds \(0\.02 s\)\. To keep going, skip failed rollouts with runtime_monitor\.exception_handling\.policy: continue$/,
    );
  });

  it("suggests a retry for a sampling failure, which may pass on another try, and not for the worker's own error", async () => {
    const failing = {
      tokenizer: new ByteTokenizer(),
      completion: () => Promise.reject(new Error("the sampler is overloaded")),
      chat: () => Promise.reject(new Error("not used")),
    };
    const sampling = scripted(async (w) => {
      await (w as unknown as { inferenceClient: InferenceClient }).inferenceClient.completion("x");
      return ok();
    });
    const r = await runner(
      sampling.Scripted,
      { mode: "fail_fast" },
      { inference: failing as unknown as SamplerInferenceClient },
    );
    await expect(r.run(task())).rejects.toThrow(
      "rollout of row 1 (group 0-0, run 0) failed after 1 attempt(s): the sampler is overloaded. To keep going, retry failed rollouts with rollout_worker.max_rollout_retries, or skip them with runtime_monitor.exception_handling.policy: continue",
    );
    const own = scripted(() => {
      throw new TypeError("x.map is not a function");
    });
    const error = (await (
      await runner(own.Scripted, { mode: "fail_fast" })
    )
      .run(task())
      .catch((e: unknown) => e)) as Error;
    expect(error.message).toContain("failed after 1 attempt(s): TypeError: x.map is not a function\n    at ");
    expect(error.message).not.toContain("To keep going");
  });

  it("skip gives up on a task after its retries and counts it", async () => {
    const r = await runner(scripted(() => Promise.reject(new Error("always"))).Scripted, {
      mode: "skip",
      retries: 1,
      minGroupSize: 2,
    });
    expect(await r.run(task())).toMatchObject({ status: "skipped", trajectories: [], attempts: 2 });
    expect(r.takeCounts()).toEqual({
      succeeded: 0,
      failed: 2,
      retried: 1,
      timedOut: 0,
      skipped: 1,
      unknownTokenIds: 0,
    });
  });

  it("times out a hung rollout, replaces its worker, and refuses trajectories the abandoned worker puts later", async () => {
    let release: () => void = () => undefined;
    const late = new Promise<void>((resolve) => (release = resolve));
    let lateError: unknown;
    const hung = scripted(async (worker, _, attempt) => {
      if (attempt === 0) {
        await late;
        try {
          (worker as unknown as { put(t: Trajectory): void }).put(ok());
        } catch (error) {
          lateError = error;
        }
        return undefined;
      }
      return ok();
    });
    const r = await runner(hung.Scripted, { mode: "retry", retries: 1 }, { timeoutMs: 30, numWorkers: 1 });
    const outcome = await r.run(task({ index: 5 }));
    expect(outcome).toMatchObject({ status: "ok", attempts: 2 });
    expect(r.takeCounts()).toMatchObject({ failed: 1, timedOut: 1, retried: 1 });
    expect(hung.created).toHaveLength(2);
    release();
    await late;
    await new Promise((resolve) => setImmediate(resolve));
    expect(String(lateError)).toMatch(/putTrajectory was called after the rollout of row 6 \(group 0-0, run 0\) ended/);
    // A rollout that fails once its timeout has decided changes nothing: the timeout stands.
    const failsLate = await runner(
      scripted(() => new Promise((_, reject) => setTimeout(() => reject(new Error("too late")), 60))).Scripted,
      { mode: "skip", retries: 0, minGroupSize: 1 },
      { timeoutMs: 20 },
    );
    expect(await failsLate.run(task())).toMatchObject({ status: "skipped", attempts: 1 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(failsLate.takeCounts()).toMatchObject({ failed: 1, timedOut: 1, skipped: 1 });
    const slow = await runner(
      scripted(() => new Promise(() => undefined)).Scripted,
      { mode: "fail_fast" },
      { timeoutMs: 20 },
    );
    const error = (await slow.run(task({ index: 2 })).catch((e: unknown) => e)) as RolloutError;
    expect(error.cause).toBeInstanceOf(UserCodeError);
    expect(error.message).toContain("took longer than rollout_worker.rollout_timeout_seconds (0.02 s)");
  });

  it("times each attempt on a worker from its own start, whatever the attempts before it did", async () => {
    // Row 1 answers at once, row 2 after 20 ms, row 3 never; one worker, so all share its timer.
    const sleeper = scripted((_, t) =>
      t.index === 0
        ? ok()
        : t.index === 1
          ? new Promise((resolve) => setTimeout(() => resolve(ok()), 20))
          : new Promise(() => undefined),
    );
    const failures: RolloutFailure[] = [];
    const r = await runner(
      sleeper.Scripted,
      { mode: "fail_fast" },
      { timeoutMs: 150, numWorkers: 1, onFailure: (f) => failures.push(f) },
    );
    expect(await r.run(task({ index: 0 }))).toMatchObject({ status: "ok" });
    expect(await r.run(task({ index: 1 }))).toMatchObject({ status: "ok" });
    // The timer armed by row 2 comes due while the worker is idle: it ends nothing.
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(failures).toEqual([]);
    const error = (await r.run(task({ index: 2 })).catch((e: unknown) => e)) as RolloutError;
    expect(error.message).toContain(
      "row 3 (group 0-0, run 0) took longer than rollout_worker.rollout_timeout_seconds (0.15 s)",
    );
    expect(r.takeCounts()).toMatchObject({ succeeded: 2, failed: 1, timedOut: 1 });
  });

  it("treats an invalid or overlong trajectory as a failed rollout naming the field", async () => {
    const bad = await runner(scripted(() => new Trajectory({ tokens: [1, 2], lossMask: [1], reward: 0 })).Scripted, {
      mode: "fail_fast",
    });
    const error = (await bad.run(task({ groupId: "0-1", runId: 0 })).catch((e: unknown) => e)) as RolloutError;
    expect(error.cause).toBeInstanceOf(InputError);
    expect((error.cause as InputError).field).toBe("lossMask");
    expect(error.message).toContain("Trajectory (group 0-1, run 0): lossMask has length 1 but tokens has length 2");
    const long = await runner(
      scripted(() => ({ tokens: Array(41).fill(1), lossMask: Array(41).fill(1), reward: 0 })).Scripted,
      { mode: "fail_fast" },
    );
    await expect(long.run(task())).rejects.toThrow(
      /tokens has length 41, more than rollout_worker.max_sequence_length \(40\); cut it with this.truncate/,
    );
  });

  it("accepts returned plain objects and arrays, stamps the version of rollouts that sampled nothing, and explains a missing inference client", async () => {
    const many = await runner(scripted(() => [{ tokens: [1, 2], lossMask: [0, 1], reward: 0.5 }, ok()]).Scripted, {
      mode: "fail_fast",
    });
    const outcome = await many.run(task({ isVal: true }));
    expect(outcome.trajectories.map((t) => [t instanceof Trajectory, t.reward, t.policyVersion, t.isVal])).toEqual([
      [true, 0.5, 7, true],
      [true, 1, 7, true],
    ]);
    const needsInference = await runner(MyTaskWorker, { mode: "fail_fast" });
    await expect(needsInference.run(task({ data: { prompt: "x" } }))).rejects.toThrow(
      /rollout_worker-\d: this run has no inference service; set rollout_worker.need_llm_inference: true/,
    );
  });

  it("runs at most num_workers rollouts at once", async () => {
    let running = 0;
    let peak = 0;
    const r = await runner(
      scripted(async () => {
        peak = Math.max(peak, ++running);
        await new Promise((resolve) => setImmediate(resolve));
        running--;
        return ok();
      }).Scripted,
      { mode: "fail_fast" },
      { numWorkers: 3 },
    );
    await Promise.all(Array.from({ length: 10 }, (_, i) => r.run(task({ runId: i }))));
    expect(peak).toBe(3);
  });

  it("aborts inference calls a rollout leaves running when it ends, and otherwise keeps one signal per worker", async () => {
    const signals: AbortSignal[] = [];
    const answer: InferenceResult = {
      promptTokens: [1],
      responseTokens: [2],
      response: "b",
      logprobs: [-0.5],
      finishReason: "stop",
    };
    const client: InferenceClient = {
      tokenizer: new ByteTokenizer(),
      completion: (_prompt, options) => {
        signals.push(options!.signal!);
        // "hang" answers only by failing when its signal aborts: the rollout that fired it does not wait for it.
        if (_prompt !== "hang") return Promise.resolve(answer);
        return new Promise<InferenceResult>((_, reject) =>
          options!.signal!.addEventListener("abort", () => reject(options!.signal!.reason as Error)),
        );
      },
      chat: () => Promise.reject(new Error("not used")),
    };
    let leftBehind: Promise<unknown> | undefined;
    const worker = scripted(async (w, t) => {
      // inferenceClient is protected: what a worker's own rollout() would call.
      const llm = (w as unknown as { inferenceClient: InferenceClient }).inferenceClient;
      if (t.data.prompt === "hang") leftBehind = llm.completion("hang").catch((e: unknown) => e);
      else await llm.completion("x");
      return ok();
    });
    const r = await runner(
      worker.Scripted,
      { mode: "fail_fast" },
      { numWorkers: 1, inference: client as SamplerInferenceClient },
    );
    await r.run(task({ data: { prompt: "x" } }));
    await r.run(task({ data: { prompt: "x" } }));
    expect(signals[1]).toBe(signals[0]);
    expect(signals[0]!.aborted).toBe(false);
    await r.run(task({ data: { prompt: "hang" } }));
    expect(signals[2]).toBe(signals[0]);
    expect(signals[2]!.aborted).toBe(true);
    expect(await leftBehind).toMatchObject({ message: "the rollout attempt is over" });
    await r.run(task({ data: { prompt: "x" } }));
    expect(signals[3]).not.toBe(signals[2]);
    expect(signals[3]!.aborted).toBe(false);
  });

  it("holds waiting tasks in order and settles each run once", async () => {
    const started: number[] = [];
    const r = await runner(
      scripted(async (_, t) => {
        started.push(t.runId);
        await new Promise((resolve) => setImmediate(resolve));
        if (t.runId === 2) throw new Error("row 2 fails");
        return ok();
      }).Scripted,
      { mode: "fail_fast" },
      { numWorkers: 2 },
    );
    const heard: string[] = [];
    const runs = Array.from({ length: 5 }, (_, runId) =>
      r.run(task({ runId })).then(
        (o) => heard.push(`ok ${o.task.runId}`),
        (e: unknown) => heard.push(`failed ${runId}: ${(e as Error).message.slice(0, 40)}`),
      ),
    );
    expect(r.busy).toBe(5);
    await Promise.all(runs);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(heard.sort()).toEqual([
      "failed 2: rollout of row 1 (group 0-0, run 2) fail",
      "ok 0",
      "ok 1",
      "ok 3",
      "ok 4",
    ]);
    expect(r.busy).toBe(0);
  });
});

describe("RolloutRunner under the run guard", () => {
  it("an uncaught error from a rollout's timer fails that rollout only; one raised after it ended goes to the run unless the policy skips", async () => {
    const failures: RolloutFailure[] = [];
    const crashes: unknown[] = [];
    const r = await runner(
      scripted(async (_, t) => {
        if (t.runId === 1) {
          setTimeout(() => {
            throw new Error("from a timer");
          }, 1);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        if (t.runId === 2) setTimeout(() => void Promise.reject(new Error("after the end")), 20);
        return ok();
      }).Scripted,
      { mode: "fail_fast" },
      { numWorkers: 3, onFailure: (f) => failures.push(f) },
    );
    const outcomes = await runGuarded({ stalled: () => undefined, crashed: (e) => crashes.push(e) }, async () => {
      const settled = await Promise.allSettled([0, 1, 2].map((runId) => r.run(task({ runId }))));
      await new Promise((resolve) => setTimeout(resolve, 60));
      return settled;
    });
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const stopped = (outcomes[1] as PromiseRejectedResult).reason as RolloutError;
    expect(stopped.cause).toBeInstanceOf(UserCodeError);
    expect(stopped.message).toContain("an uncaught Error: from a timer in the rollout of row 1 (group 0-0, run 1)");
    expect(failures.map((f) => [f.task.runId, f.action])).toEqual([[1, "stop"]]);
    expect(crashes).toEqual([expect.objectContaining({ message: "after the end" })]);
    expect(process.listenerCount("beforeExit")).toBe(0);
  });

  it("under skip, an uncaught error raised after a rollout ended is reported and the run goes on", async () => {
    const failures: RolloutFailure[] = [];
    const crashes: unknown[] = [];
    const r = await runner(
      scripted(() => {
        setTimeout(() => void Promise.reject(new Error("after the end")), 10);
        return ok();
      }).Scripted,
      { mode: "skip", retries: 0, minGroupSize: 1 },
      { onFailure: (f) => failures.push(f) },
    );
    const outcome = await runGuarded({ stalled: () => undefined, crashed: (e) => crashes.push(e) }, async () => {
      const done = await r.run(task({ index: 3 }));
      await new Promise((resolve) => setTimeout(resolve, 40));
      return done;
    });
    expect(outcome.status).toBe("ok");
    expect(crashes).toEqual([]);
    expect(failures.map((f) => [f.task.index, f.attempt, f.action, String(f.error)])).toEqual([
      [3, 1, "none", expect.stringContaining("an uncaught Error: after the end in the rollout of row 4")],
    ]);
    expect(String(failures[0]!.error)).toContain("after it had ended");
  });

  it("endHung ends the attempts running now as hung (running() lists them), and the policy retries them", async () => {
    const r = await runner(
      scripted((_, t, attempt) => (t.runId === 0 && attempt === 0 ? new Promise(() => undefined) : ok())).Scripted,
      { mode: "retry", retries: 1 },
      { numWorkers: 2 },
    );
    const first = r.run(task({ runId: 0, index: 4 }));
    const second = r.run(task({ runId: 1 }));
    expect((await second).status).toBe("ok");
    expect(r.running().map((t) => t.index)).toEqual([4]);
    r.endHung();
    expect(await first).toMatchObject({ status: "ok", attempts: 2 });
    expect(r.takeCounts()).toMatchObject({ failed: 1, timedOut: 1, retried: 1, succeeded: 2 });
    expect(r.running()).toEqual([]);
  });
});
