import { afterEach, describe, expect, it } from "vitest";
import { Exchange, TIMED_OUT } from "../../src/http/exchange.js";
import { ConnectionPool } from "../../src/http/pools.js";
import { failure, testServer } from "../support/http-server.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function pool(handler: Parameters<typeof testServer>[0]): Promise<ConnectionPool> {
  const server = await testServer(handler);
  const p = new ConnectionPool(server.url, 1);
  cleanups.push(async () => {
    await p.close();
    await server.close();
  });
  return p;
}

describe("Exchange", () => {
  it("collects the answer whole: status, headers and every chunk of the body", async () => {
    const p = await pool((_req, res) => {
      res.writeHead(201, { "x-part": "two" });
      res.write("first ");
      setTimeout(() => res.end("second"), 10);
    });
    const answer = await new Exchange(p, { path: "/", method: "GET" }, 5_000).answer;
    expect([answer.status, answer.headers["x-part"], answer.body.toString("utf8")]).toEqual([
      201,
      "two",
      "first second",
    ]);
  });

  it("rejects at once through a closed pool, and with TIMED_OUT when its timeout passes first", async () => {
    const closed = new ConnectionPool("http://127.0.0.1:9", 1);
    await closed.close();
    const error = await failure(new Exchange(closed, { path: "/", method: "GET" }, 60_000).answer);
    expect((error as { code?: string }).code).toBe("UND_ERR_DESTROYED");
    const silent = await pool(() => undefined);
    expect(await failure(new Exchange(silent, { path: "/", method: "GET" }, 50).answer)).toBe(TIMED_OUT);
  });

  it("rejects with the reason of abort(), given before the request started or while it waits for its answer", async () => {
    const p = await pool(() => undefined);
    const reason = new Error("given up");
    const early = new Exchange(p, { path: "/", method: "GET" }, 60_000);
    early.abort(reason);
    expect(await failure(early.answer)).toBe(reason);
    const late = new Exchange(p, { path: "/", method: "GET" }, 60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    late.abort(reason);
    expect(await failure(late.answer)).toBe(reason);
  });
});
