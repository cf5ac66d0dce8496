import { afterEach, describe, expect, it, vi } from "vitest";
import { resolveEndpoint } from "../../src/http/endpoint.js";
import { Heartbeat } from "../../src/http/heartbeat.js";
import { SubmitOrder } from "../../src/http/submit-order.js";
import { ConfigError, NexrlError } from "../../src/errors.js";

const SPEC = {
  service: "Tinker",
  keyVar: "TINKER_API_KEY",
  urlVar: "TINKER_BASE_URL",
  defaultUrl: "https://example.invalid",
};

describe("resolveEndpoint", () => {
  it("prefers options, then the environment, then the public URL", () => {
    expect(
      resolveEndpoint(
        { apiKey: "a", baseUrl: "http://x", env: { TINKER_API_KEY: "b", TINKER_BASE_URL: "http://y" } },
        SPEC,
      ),
    ).toEqual({ apiKey: "a", baseUrl: "http://x" });
    expect(resolveEndpoint({ env: { TINKER_API_KEY: "b", TINKER_BASE_URL: "http://y" } }, SPEC)).toEqual({
      apiKey: "b",
      baseUrl: "http://y",
    });
    expect(resolveEndpoint({ env: { TINKER_API_KEY: "b" } }, SPEC)).toEqual({
      apiKey: "b",
      baseUrl: "https://example.invalid",
    });
    expect(() => resolveEndpoint({ env: {} }, SPEC)).toThrow(ConfigError);
    expect(() => resolveEndpoint({ apiKey: "", env: {} }, SPEC)).toThrow(/set TINKER_API_KEY or pass apiKey/);
  });
});

describe("Heartbeat", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("beats on its interval without overlapping, warns after beats fail for long enough, and stops", async () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    let beats = 0;
    let fail = false;
    const heartbeat = new Heartbeat({
      intervalMs: 1000,
      warnAfterMs: 2500,
      label: "Test session s1",
      log: (l) => lines.push(l),
      beat: async () => {
        beats++;
        if (fail) throw new Error("503 from the service");
      },
    });
    await vi.advanceTimersByTimeAsync(3000);
    expect(beats).toBe(3);
    fail = true;
    await vi.advanceTimersByTimeAsync(2000);
    expect(lines).toEqual([]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(lines).toEqual([
      "nexrl: Test session s1 has had no successful heartbeat for 3 s (503 from the service); the service may end the session",
    ]);
    heartbeat.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(beats).toBe(6);
  });

  it("does not keep the process alive", () => {
    const heartbeat = new Heartbeat({ intervalMs: 1000, label: "s", beat: async () => undefined });
    const timer = (heartbeat as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    heartbeat.stop();
  });
});

describe("SubmitOrder", () => {
  it("runs submissions one after another in call order", async () => {
    const order = new SubmitOrder();
    const log: string[] = [];
    const slow = order.run("a", async () => {
      await new Promise((r) => setTimeout(r, 20));
      log.push("a");
      return 1;
    });
    const fast = order.run("b", async () => {
      log.push("b");
      return 2;
    });
    expect(await Promise.all([slow, fast])).toEqual([1, 2]);
    expect(log).toEqual(["a", "b"]);
  });

  it("fails every later submission fast once one is lost, naming the first failure", async () => {
    const order = new SubmitOrder();
    const lost = order.run("forward_backward (seq_id 4)", async () => {
      throw new Error("connection refused");
    });
    let sent = false;
    const next = order.run("optim_step (seq_id 5)", async () => {
      sent = true;
    });
    await expect(lost).rejects.toThrow("connection refused");
    await expect(next).rejects.toThrow(NexrlError);
    await expect(next).rejects.toThrow(
      /cannot submit optim_step \(seq_id 5\): the earlier forward_backward \(seq_id 4\) could not be submitted \(connection refused\)/,
    );
    expect(sent).toBe(false);
  });
});
