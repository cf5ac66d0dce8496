import { describe, expect, it } from "vitest";
import { UserCodeError } from "../../src/errors.js";
import { markSamplingError, retryCouldHelp, userFrames } from "../../src/rollouts/error-origin.js";

describe("where a rollout's error came from", () => {
  it("userFrames keeps the frames of the user's files and drops Node's, node_modules' and nexrl's", () => {
    const error = new Error("boom");
    error.stack = [
      "Error: boom",
      "    at Worker.rollout (/home/me/project/worker.ts:12:5)",
      "    at file:///home/me/project/helper.ts:3:1",
      "    at callRollout (file:///home/me/project/node_modules/nexrl/dist/rollouts/runner.js:27:19)",
      "    at AsyncLocalStorage.run (node:async_hooks:346:14)",
      `    at inRollout (${new URL("../../src/rollouts/run-guard.ts", import.meta.url).pathname}:54:21)`,
      "    at Array.forEach (<anonymous>)",
    ].join("\n");
    expect(userFrames(error)).toEqual([
      "/home/me/project/worker.ts:12:5 (Worker.rollout)",
      "/home/me/project/helper.ts:3:1",
    ]);
    expect(userFrames("a string")).toEqual([]);
  });

  it("retryCouldHelp: timeouts, sampling, the network and retryable statuses, anywhere in the cause chain; not a bug", () => {
    const sampling = new Error("sampler down");
    markSamplingError(sampling);
    const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    const undici = Object.assign(new Error("body timeout"), { code: "UND_ERR_BODY_TIMEOUT" });
    const final = Object.assign(new Error("HTTP 503 but final"), { isRetryable: false, status: 503 });
    for (const [error, could] of [
      [new UserCodeError("took too long", { code: "timeout" }), true],
      [new UserCodeError("never finishes", { code: "hung" }), true],
      [sampling, true],
      [new Error("fetch failed", { cause: reset }), true],
      [undici, true],
      [Object.assign(new Error("rate limited"), { status: 429 }), true],
      [Object.assign(new Error("bad request"), { status: 400 }), false],
      [Object.assign(new Error("aborted"), { name: "TimeoutError" }), true],
      [final, false],
      [new TypeError("x.map is not a function"), false],
      ["a thrown string", false],
    ] as const)
      expect([error instanceof Error ? error.message : error, retryCouldHelp(error)]).toEqual([
        error instanceof Error ? error.message : error,
        could,
      ]);
  });
});
