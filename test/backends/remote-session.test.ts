import { describe, expect, it, vi } from "vitest";
import { isTransient, RemoteSession, waitBefore, type RemoteContext } from "../../src/backends/remote/session.js";
import { json, testServer } from "../support/http-server.js";
import { onCleanup } from "../support/training.js";
import { APIConnectionError, APIError, APITimeoutError, APIUserAbortError, ConfigError } from "../../src/errors.js";

const KEY = "remote-session-key-3b9d7c";
const SPEC = { service: "Acme", keyHeader: "X-Acme-Key", defaultUrl: "http://127.0.0.1:9", heartbeatIntervalMs: 5 };

/** A loopback server that creates sessions (failing the first `failures` attempts) and counts heartbeats. */
async function acme(failures = 0) {
  let refused = 0;
  const server = await testServer((req, res) => {
    if (req.url === "/sessions" && refused++ < failures) json(res, 400, { error: "not yet" });
    else if (req.url === "/sessions") json(res, 200, { id: `s${refused}` });
    else json(res, 200, {});
  });
  onCleanup(() => server.close());
  return server;
}

function session(url: string, log: string[] = [], env: Record<string, string> = { ACME_API_KEY: KEY }) {
  let opens = 0;
  let beats = 0;
  const remote = new RemoteSession<RemoteContext>(
    SPEC,
    { baseUrl: url, env, maxRetries: 0, log: (line) => log.push(line) },
    async (r) => {
      opens++;
      const { body } = await r.http.request<{ id: string }>({ method: "POST", path: "/sessions", retry: "none" });
      return {
        context: { http: r.http, sessionId: body.id, closed: r.closed, log: undefined },
        beat: async () => {
          beats++;
          await r.http.request({ method: "POST", path: `/beat/${body.id}`, retry: "none" });
        },
      };
    },
  );
  return { remote, opens: () => opens, beats: () => beats };
}

describe("RemoteSession", () => {
  it("reads the key from <NAME>_API_KEY and sends it in the service's header, and names the variable when it is missing", async () => {
    const server = await acme();
    const { remote } = session(server.url);
    onCleanup(() => remote.close("test over"));
    expect((await remote.context()).sessionId).toBe("s1");
    expect(server.seen[0]!.headers["x-acme-key"]).toBe(KEY);
    expect(() => session(server.url, [], {})).toThrow(ConfigError);
    expect(() => session(server.url, [], {})).toThrow(/ACME_API_KEY/);
  });

  it("opens the session once for concurrent callers, and again after a failed attempt", async () => {
    const server = await acme(1);
    const { remote, opens } = session(server.url);
    onCleanup(() => remote.close("test over"));
    await expect(remote.context()).rejects.toThrow(/HTTP 400/);
    const [a, b] = await Promise.all([remote.context(), remote.context()]);
    expect([a.sessionId, a === b, opens()]).toEqual(["s2", true, 2]);
  });

  it("beats until closed, then aborts waits, stops beating and releases before the transport closes", async () => {
    const server = await acme();
    const { remote, beats } = session(server.url);
    const ctx = await remote.context();
    await vi.waitFor(() => expect(server.seen.filter((s) => s.url === "/beat/s1").length).toBeGreaterThan(1));
    const waiting = waitBefore(ctx, 60_000, "GET", "/operations/7").catch((e: unknown) => e);
    const released: number[] = [];
    await remote.close("closed by the test", async () => {
      await ctx.http.request({ method: "POST", path: "/release", retry: "none" });
      released.push(server.seen.length);
    });
    const error = await waiting;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as Error).message).toContain(`${server.url}/operations/7`);
    expect(ctx.closed.aborted).toBe(true);
    expect(released).toHaveLength(1);
    // The heartbeat timer is cleared: no beat starts in ten of its intervals after close.
    const beaten = beats();
    await new Promise((resolve) => setTimeout(resolve, 10 * SPEC.heartbeatIntervalMs));
    expect(beats()).toBe(beaten);
  });

  it("counts retryable statuses, broken connections and timeouts as transient, and honours x-should-retry", () => {
    const status = (code: number, headers: Record<string, string> = {}) =>
      APIError.fromStatus({ method: "GET", url: "u", status: code, body: {}, headers, hint: "" });
    expect([429, 500, 503, 400, 404].map((code) => isTransient(status(code)))).toEqual([
      true,
      true,
      true,
      false,
      false,
    ]);
    expect(isTransient(status(500, { "x-should-retry": "false" }))).toBe(false);
    const request = { method: "GET", url: "u" };
    expect(isTransient(APIConnectionError.fromCause(request, true, new Error("reset")))).toBe(true);
    expect(isTransient(APITimeoutError.fromTimeout(request, 10))).toBe(true);
    expect(isTransient(APIUserAbortError.fromReason(request, "closed"))).toBe(false);
    expect(isTransient(new Error("other"))).toBe(false);
  });
});
