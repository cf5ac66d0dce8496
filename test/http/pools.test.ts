import { afterEach, describe, expect, it } from "vitest";
import { APITimeoutError, APIUserAbortError } from "../../src/errors.js";
import { HttpTransport } from "../../src/http/index.js";
import { acquirePool } from "../../src/http/pools.js";
import { failure, testServer } from "../support/http-server.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** A server that holds every answer until `release()`, then answers with the path. */
async function heldServer() {
  const held: Array<() => void> = [];
  const server = await testServer((req, res) => held.push(() => res.end(req.url)));
  cleanups.push(() => server.close());
  const until = async (count: number) => {
    while (held.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  return { server, held, until, release: () => held.splice(0).forEach((answer) => answer()) };
}

describe("connection pools", () => {
  it("open at most `connections` connections to an origin; calls beyond them wait for a free one", async () => {
    const { server, held, until, release } = await heldServer();
    const http = new HttpTransport({ baseUrl: server.url, connections: 2 });
    cleanups.push(() => http.close());
    const calls = Array.from({ length: 5 }, (_, i) => http.request({ method: "GET", path: `/${i}` }));
    await until(2);
    // The other three wait for a connection: the server never sees more than two at once.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(held).toHaveLength(2);
    while (held.length > 0 || server.seen.length < 5) {
      release();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect((await Promise.all(calls)).map((r) => r.body)).toEqual(["/0", "/1", "/2", "/3", "/4"]);
    expect(server.sockets()).toBe(2);
  });

  it("give a connection freed to the next waiting call, skipping calls given up on while they waited", async () => {
    const { server, until, release } = await heldServer();
    const http = new HttpTransport({ baseUrl: server.url, connections: 1, maxRetries: 0 });
    cleanups.push(() => http.close());
    const first = http.request({ method: "GET", path: "/first" });
    await until(1);
    const stop = new AbortController();
    const late = failure(http.request({ method: "GET", path: "/late", timeoutMs: 30 }));
    const aborted = failure(http.request({ method: "GET", path: "/aborted", signal: stop.signal }));
    const next = http.request({ method: "GET", path: "/next" });
    stop.abort(new Error("not needed"));
    expect(await late).toBeInstanceOf(APITimeoutError);
    expect(await aborted).toBeInstanceOf(APIUserAbortError);
    release();
    expect((await first).body).toBe("/first");
    await until(1);
    release();
    expect((await next).body).toBe("/next");
    expect(server.seen.map((s) => s.url)).toEqual(["/first", "/next"]);
    expect(server.sockets()).toBe(1);
  });

  it("are shared per origin and connection limit, and closed when the last user lets go", async () => {
    const { server } = await heldServer();
    const a = acquirePool(server.url, 4);
    const b = acquirePool(server.url, 4);
    const other = acquirePool(server.url, 8);
    expect(a.shared).toBe(b.shared);
    expect(other.shared).not.toBe(a.shared);
    await a.release();
    await a.release();
    expect(b.shared.pool.closed).toBe(false);
    await b.release();
    expect(b.shared.pool.closed).toBe(true);
    const c = acquirePool(server.url, 4);
    expect(c.shared).not.toBe(a.shared);
    await c.release();
    await other.release();
  });
});
