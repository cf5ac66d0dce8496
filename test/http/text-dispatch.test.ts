import { Pool, type Dispatcher } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import type { Connections } from "../../src/http/pools.js";
import { exchange } from "./exchange.js";
import { testServer } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** A server, and connections to it through an undici pool of one connection (which queues the rest). */
async function serve(handler: Parameters<typeof testServer>[0]) {
  const server = await testServer(handler);
  const undiciPool = new Pool(server.url, { connections: 1 });
  const given: Dispatcher[] = [];
  const pool: Connections = { take: () => undiciPool, give: (connection) => void given.push(connection) };
  cleanups.push(async () => {
    await undiciPool.destroy();
    await server.close();
  });
  return { server, pool, given };
}

describe("dispatchText", () => {
  it("collects an answer sent in pieces, a character split between two of them included", async () => {
    const euro = Buffer.from("€", "utf8");
    const { pool, given } = await serve((_req, res) => {
      res.writeHead(201, { "content-type": "text/plain", "x-request-id": "r-1" });
      res.write(Buffer.concat([Buffer.from("price: "), euro.subarray(0, 1)]));
      setTimeout(() => res.end(Buffer.concat([euro.subarray(1), Buffer.from("5")])), 20);
    });
    const answer = await exchange(pool, { path: "/a", method: "POST", body: "{}" }).answer;
    expect(answer.statusCode).toBe(201);
    expect(answer.headers["x-request-id"]).toBe("r-1");
    expect(answer.text).toBe("price: €5");
    expect(given).toHaveLength(1);
  });

  it("rejects at once when aborted while waiting for a connection, and never sends that request", async () => {
    const held: Array<() => void> = [];
    const { server, pool, given } = await serve((_req, res) => held.push(() => res.end("first")));
    // One connection: the second request waits for the first to be answered.
    const first = exchange(pool, { path: "/first", method: "GET" });
    const second = exchange(pool, { path: "/second", method: "GET" });
    while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const reason = new Error("given up");
    second.abort(reason);
    await expect(second.answer).rejects.toBe(reason);
    held[0]!();
    expect((await first.answer).text).toBe("first");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(server.seen.map((s) => s.url)).toEqual(["/first"]);
    // Both connections went back: the answered one and the one undici never sent.
    expect(given).toHaveLength(2);
  });

  it("rejects with the abort reason while the answer is on its way", async () => {
    const { pool, given } = await serve(() => undefined);
    const sent = exchange(pool, { path: "/slow", method: "GET" });
    setTimeout(() => sent.abort(new Error("timed out")), 30);
    await expect(sent.answer).rejects.toThrow("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(given).toHaveLength(1);
  });

  it("rejects, and gives nothing back, when no connection can be taken", async () => {
    const refused = new Error("no connection");
    const given: Dispatcher[] = [];
    const sent = exchange(
      {
        take: () => {
          throw refused;
        },
        give: (connection) => void given.push(connection),
      },
      { path: "/", method: "GET" },
    );
    await expect(sent.answer).rejects.toBe(refused);
    expect(given).toHaveLength(0);
  });
});
