import type { IncomingMessage, ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { FaultInjector, parseFaults, type FaultKind } from "../../src/server/faults.js";
import { composeHandlers, type RequestHandler } from "../../src/server/handler.js";
import { sendJson } from "../../src/server/io.js";
import { call, server } from "../support/server.js";
import { ConfigError, NexrlError, ProtocolError } from "../../src/errors.js";

describe("nexrl serve", () => {
  it("binds 127.0.0.1 on a free port and answers /healthz and /health", async () => {
    const { url } = await server();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    for (const path of ["/healthz", "/health", "/api/v1/healthz"])
      expect((await call(url, "GET", path)).body).toEqual({ status: "ok" });
    const missing = await call(url, "GET", "/nothing");
    expect(missing.status).toBe(404);
    expect(missing.body.message).toMatch(/no route for GET \/nothing/);
  });

  it("serves only the protocols asked for", async () => {
    const { url } = await server({ protocol: "weaver" });
    expect(
      (await call(url, "POST", "/api/v1/create_session", { tags: [], sdk_version: "x", type: "create_session" }))
        .status,
    ).toBe(404);
    expect((await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "x" })).status).toBe(200);
  });

  it("tries handlers in order; turns a NexrlError into 400, a ProtocolError into its status, anything else into a logged 500", async () => {
    const logs: string[] = [];
    const seen: string[] = [];
    const handler =
      (name: string, act: (req: IncomingMessage, res: ServerResponse) => boolean): RequestHandler =>
      async (req, res) => {
        seen.push(name);
        return act(req, res);
      };
    const listener = composeHandlers(
      [
        handler("skip", () => false),
        handler("answer", (req, res) => {
          if (req.url === "/bad") throw new NexrlError("bad input");
          if (req.url === "/gone")
            throw new ProtocolError("it went", { status: 410, code: "gone", headers: { "retry-after": "3" } });
          if (req.url === "/bug") throw new TypeError("a bug");
          sendJson(res, 200, { ok: true });
          return true;
        }),
        handler("never", () => true),
      ],
      (line) => logs.push(line),
    );
    const { createServer } = await import("node:http");
    const http = createServer(listener);
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
    try {
      expect((await call(url, "GET", "/ok")).body).toEqual({ ok: true });
      expect(seen).toEqual(["skip", "answer"]);
      expect(await call(url, "GET", "/bad")).toMatchObject({
        status: 400,
        body: { error: "invalid_request", message: "bad input", retryable: false },
      });
      const gone = await call(url, "GET", "/gone");
      expect(gone).toMatchObject({ status: 410, body: { error: "gone", message: "it went" } });
      expect(gone.headers.get("retry-after")).toBe("3");
      expect(await call(url, "GET", "/bug")).toMatchObject({
        status: 500,
        body: { error: "internal_error", retryable: true },
      });
      expect(logs).toHaveLength(1);
      expect(logs[0]).toMatch(/GET \/bug failed: TypeError: a bug/);
    } finally {
      http.close();
    }
  });
});

describe("fault injection", () => {
  it("parses KIND:RATE lists and explains bad ones", () => {
    expect(parseFaults("408:0.1, 410:0.05,429:0.1,500:0.1,error:0.05,drop:0.05")).toEqual({
      408: 0.1,
      410: 0.05,
      429: 0.1,
      500: 0.1,
      error: 0.05,
      drop: 0.05,
    });
    expect(parseFaults("")).toEqual({});
    expect(() => parseFaults("503:0.1")).toThrow(/bad fault "503:0.1"; write KIND:RATE/);
    expect(() => parseFaults("429:2")).toThrow(ConfigError);
    expect(() => parseFaults("429:0.6,500:0.6")).toThrow(/add up to 1.2/);
  });

  it("draws the same faults for the same seed, at the configured rates, among the applicable kinds", () => {
    const rates = { 429: 0.2, 500: 0.1, drop: 0.1 };
    const draws = (seed: number, kinds: FaultKind[]) => {
      const injector = new FaultInjector(rates, seed);
      return Array.from({ length: 4000 }, () => injector.draw(kinds));
    };
    expect(draws(5, ["429", "500", "drop"])).toEqual(draws(5, ["429", "500", "drop"]));
    expect(draws(5, ["429", "500", "drop"])).not.toEqual(draws(6, ["429", "500", "drop"]));
    const counts = (list: Array<FaultKind | undefined>) =>
      Object.fromEntries(["429", "500", "drop"].map((k) => [k, list.filter((d) => d === k).length / list.length]));
    const shares = counts(draws(7, ["429", "500", "drop"]));
    expect(shares["429"]).toBeCloseTo(0.2, 1);
    expect(shares["500"]).toBeCloseTo(0.1, 1);
    expect(draws(7, ["500"]).every((d) => d === undefined || d === "500")).toBe(true);
    expect(new FaultInjector({}, 1).draw(["500"])).toBeUndefined();
  });

  it("closes the connection for drop and sends retry-after with 429", async () => {
    const drop = await server({ protocol: "tinker", faults: { drop: 1 } });
    await expect(call(drop.url, "POST", "/api/v1/client/config", { sdk_version: "x" })).rejects.toThrow(/fetch failed/);
    const slow = await server({ protocol: "tinker", faults: { 429: 1 } });
    const limited = await call(slow.url, "POST", "/api/v1/client/config", { sdk_version: "x" });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after-ms")).toBe("10");
    expect(limited.headers.get("retry-after")).toBe("1");
  });
});
