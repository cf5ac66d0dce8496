import { afterEach, describe, expect, it } from "vitest";
import { ConnectionPool, acquirePool } from "../../src/http/pools.js";
import { exchange } from "./exchange.js";
import { testServer } from "./helpers.js";

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
  return { server, until, release: () => held.splice(0).forEach((answer) => answer()) };
}

describe("ConnectionPool", () => {
  it("opens one connection per request in flight and reuses them, never more than were busy at once", async () => {
    const { server, until, release } = await heldServer();
    const pool = new ConnectionPool(server.url);
    cleanups.push(() => pool.close());

    const burst = Array.from({ length: 8 }, (_, i) => exchange(pool, { path: `/burst-${i}`, method: "GET" }));
    await until(8);
    expect(pool.size).toBe(8);
    release();
    expect((await Promise.all(burst.map((e) => e.answer))).map((a) => a.text)).toEqual(
      burst.map((_, i) => `/burst-${i}`),
    );

    // Twenty more, four at a time: the eight connections are enough.
    for (let round = 0; round < 5; round++) {
      const wave = Array.from({ length: 4 }, (_, i) => exchange(pool, { path: `/wave-${round}-${i}`, method: "GET" }));
      await until(4);
      release();
      await Promise.all(wave.map((e) => e.answer));
    }
    expect(pool.size).toBe(8);
    expect(server.sockets()).toBe(8);
  });

  it("hands out the connection freed last first, so a burst's extra connections go idle", async () => {
    const { server, until, release } = await heldServer();
    const pool = new ConnectionPool(server.url);
    cleanups.push(() => pool.close());
    const burst = Array.from({ length: 4 }, (_, i) => exchange(pool, { path: `/${i}`, method: "GET" }));
    await until(4);
    release();
    await Promise.all(burst.map((e) => e.answer));
    const first = pool.take();
    const second = pool.take();
    expect(first).not.toBe(second);
    pool.give(second);
    expect(pool.take()).toBe(second);
    pool.give(first);
    pool.give(second);
  });

  it("drops a connection that was closed, and refuses new requests once closed", async () => {
    const { server } = await heldServer();
    const pool = new ConnectionPool(server.url);
    const client = pool.take();
    await client.close();
    pool.give(client);
    expect(pool.size).toBe(0);
    await pool.close();
    const sent = exchange(pool, { path: "/late", method: "GET" });
    await expect(sent.answer).rejects.toThrow(`the connections to ${server.url} were closed`);
    expect(server.seen).toHaveLength(0);
  });

  it("is shared per origin and closed when the last user lets go", async () => {
    const { server } = await heldServer();
    const a = acquirePool(server.url);
    const b = acquirePool(server.url);
    expect(a.pool).toBe(b.pool);
    await a.release();
    await a.release();
    expect(() => b.pool.take()).not.toThrow();
    await b.release();
    expect(() => b.pool.take()).toThrow("were closed");
    const c = acquirePool(server.url);
    expect(c.pool).not.toBe(a.pool);
    await c.release();
  });
});
