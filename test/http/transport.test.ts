import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { HttpTransport, backoffDelayMs, retryAfterMs, type HttpTransportOptions } from "../../src/http/index.js";
import { failure, json, testServer } from "../support/http-server.js";
import {
  APIConnectionError,
  APIError,
  APITimeoutError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  UnprocessableEntityError,
} from "../../src/errors.js";

const KEY = "tml-secret-key-0123456789";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function serve(handler: Parameters<typeof testServer>[0]) {
  const server = await testServer(handler);
  cleanups.push(server.close);
  return server;
}

function transport(url: string, options: Partial<HttpTransportOptions> = {}): HttpTransport {
  const t = new HttpTransport({
    baseUrl: url,
    apiKey: KEY,
    apiKeyHeader: "X-API-Key",
    apiKeySource: "TINKER_API_KEY",
    backoff: { initialDelayMs: 1, maxDelayMs: 4 },
    ...options,
  });
  cleanups.push(() => t.close());
  return t;
}

describe("HttpTransport", () => {
  it("sends JSON with the API key header under the base URL's path prefix and parses JSON back", async () => {
    const server = await serve((_req, res, seen) =>
      json(res, 200, { echo: JSON.parse(seen.body) }, { "x-request-id": "req-1" }),
    );
    const http = transport(`${server.url}/services/tinker-prod/`);
    const response = await http.request<{ echo: unknown }>({ method: "POST", path: "/api/v1/x", body: { a: 1 } });
    expect(response).toMatchObject({ status: 200, body: { echo: { a: 1 } }, requestId: "req-1" });
    expect(server.seen[0]).toMatchObject({ method: "POST", url: "/services/tinker-prod/api/v1/x" });
    expect(server.seen[0]!.headers["x-api-key"]).toBe(KEY);
    expect(server.seen[0]!.headers["content-type"]).toBe("application/json");
  });

  it("reads an empty answer as undefined, text and malformed JSON as text, and joins repeated headers", async () => {
    const server = await serve((req, res) => {
      if (req.url === "/empty") return void res.writeHead(204).end();
      if (req.url === "/text") {
        res.writeHead(200, { "content-type": "text/plain", "set-cookie": ["a=1", "b=2"] });
        return void res.end("plain words");
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{not json");
    });
    const http = transport(server.url);
    expect((await http.request({ method: "GET", path: "/empty" })).body).toBeUndefined();
    const text = await http.request({ method: "GET", path: "/text" });
    expect([text.body, text.headers["set-cookie"]]).toEqual(["plain words", "a=1, b=2"]);
    expect((await http.request({ method: "GET", path: "/bad" })).body).toBe("{not json");
  });

  it("sends an already serialised body as it is, the same bytes on every retry", async () => {
    let calls = 0;
    const server = await serve((_req, res) =>
      ++calls < 3 ? json(res, 503, { message: "busy" }) : json(res, 200, { ok: true }),
    );
    const encoded = '{"b":1,"a":[0.1,-0]}';
    const response = await transport(server.url).request({
      method: "POST",
      path: "/raw",
      encodedBody: Buffer.from(encoded),
      retry: "all",
    });
    expect(response.body).toEqual({ ok: true });
    expect(server.seen.map((s) => [s.body, s.headers["content-type"]])).toEqual(
      Array(3).fill([encoded, "application/json"]),
    );
  });

  it.each([
    [400, BadRequestError, false],
    [401, AuthenticationError, false],
    [403, PermissionDeniedError, false],
    [404, NotFoundError, false],
    [409, ConflictError, false],
    [422, UnprocessableEntityError, false],
    [429, RateLimitError, true],
    [500, InternalServerError, true],
    [503, InternalServerError, true],
    [418, APIError, false],
  ] as const)("maps HTTP %i to its typed error", async (status, Class, retryable) => {
    const server = await serve((_req, res) => json(res, status, { message: `status ${status}`, request_id: "rid-7" }));
    const error = (await failure(
      transport(server.url, { maxRetries: 0 }).request({ method: "GET", path: "/a" }),
    )) as APIError;
    expect(error).toBeInstanceOf(Class);
    expect(error.constructor).toBe(Class);
    expect(error).toMatchObject({
      status,
      requestId: "rid-7",
      isRetryable: retryable,
      method: "GET",
      url: `${server.url}/a`,
    });
    expect(error.message).toContain(`HTTP ${status}: status ${status}`);
    expect(error.message).toContain("rid-7");
  });

  it("names the key's source in authentication errors", async () => {
    const server = await serve((_req, res) => json(res, 401, { detail: "bad key" }));
    const error = (await failure(transport(server.url).request({ method: "GET", path: "/a" }))) as Error;
    expect(error.message).toMatch(/bad key.*check TINKER_API_KEY/);
  });

  it("lets x-should-retry and a retryable body field decide", async () => {
    let n = 0;
    const server = await serve((_req, res) =>
      n++ === 0 ? json(res, 500, { error: "x", retryable: false }) : json(res, 400, {}, { "x-should-retry": "true" }),
    );
    const http = transport(server.url, { maxRetries: 0 });
    expect(await failure(http.request({ method: "GET", path: "/a" }))).toMatchObject({
      status: 500,
      isRetryable: false,
    });
    expect(await failure(http.request({ method: "GET", path: "/a" }))).toMatchObject({
      status: 400,
      isRetryable: true,
    });
  });

  it("retries retryable statuses with one idempotency key, honouring retry-after-ms", async () => {
    let n = 0;
    const server = await serve((_req, res) => {
      n++;
      if (n === 1) return json(res, 429, { message: "slow down" }, { "retry-after-ms": "5" });
      if (n === 2) return json(res, 503, { message: "busy" });
      json(res, 200, { ok: true });
    });
    const lines: string[] = [];
    const http = transport(server.url, { log: (l) => lines.push(l) });
    const response = await http.request({
      method: "POST",
      path: "/submit",
      body: {},
      retry: "all",
      idempotencyKey: true,
    });
    expect(response.body).toEqual({ ok: true });
    const keys = server.seen.map((s) => s.headers["x-idempotency-key"]);
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^nexrl-retry-[0-9a-f-]{36}$/);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/HTTP 429.*retry 1\/10 in 5 ms/);
  });

  it("does not resend a POST after an error status by default, and stops after maxRetries", async () => {
    const server = await serve((_req, res) => json(res, 500, { message: "boom" }));
    expect(await failure(transport(server.url).request({ method: "POST", path: "/op", body: {} }))).toBeInstanceOf(
      InternalServerError,
    );
    expect(server.seen).toHaveLength(1);
    expect(
      await failure(transport(server.url, { maxRetries: 2 }).request({ method: "GET", path: "/op" })),
    ).toBeInstanceOf(InternalServerError);
    expect(server.seen).toHaveLength(4);
  });

  it("retries a connection that was never made even for a POST, and reports it as not connected", async () => {
    const server = await serve(() => undefined);
    const url = server.url;
    await server.close();
    const lines: string[] = [];
    const error = (await failure(
      transport(url, { maxRetries: 2, log: (l) => lines.push(l) }).request({ method: "POST", path: "/op", body: {} }),
    )) as APIConnectionError;
    expect(error).toBeInstanceOf(APIConnectionError);
    expect(error).toMatchObject({ connected: false, isRetryable: true, status: undefined });
    expect(lines).toHaveLength(2);
  });

  it("gives up soon on a refused loopback connection to an origin that never answered, and retries fully once it has", async () => {
    const server = await serve((_req, res) => json(res, 200, { ok: true }));
    const url = server.url;
    const answered = transport(url, { maxRetries: 6 });
    await answered.request({ method: "GET", path: "/op" });
    await server.close();
    const afterAnswer: string[] = [];
    const restart = (await failure(
      transport(url, { maxRetries: 6, log: (l) => afterAnswer.push(l) }).request({ method: "GET", path: "/op" }),
    )) as APIConnectionError;
    // The origin answered before (through the same pool): a restart is plausible, so every retry is made.
    expect(afterAnswer).toHaveLength(6);
    expect(restart.message).toMatch(/could not connect \(connection refused: nothing listens on 127\.0\.0\.1:\d+\)/);
    const fresh = await serve(() => undefined);
    await fresh.close();
    const firstContact: string[] = [];
    const error = (await failure(
      transport(fresh.url, { maxRetries: 6, log: (l) => firstContact.push(l) }).request({ method: "GET", path: "/op" }),
    )) as APIConnectionError;
    expect(error).toMatchObject({ connected: false });
    expect(firstContact.map((l) => /retry (\d+\/\d+)/.exec(l)![1])).toEqual(["1/3", "2/3", "3/3"]);
  });

  it("does not resend a POST whose connection broke after sending unless told to", async () => {
    let n = 0;
    const server = await serve((req, res) => (n++ === 0 ? req.socket.destroy() : json(res, 200, { ok: n })));
    const error = (await failure(
      transport(server.url).request({ method: "POST", path: "/op", body: {} }),
    )) as APIConnectionError;
    expect(error).toMatchObject({ connected: true });
    expect(error.message).toMatch(/may or may not have handled/);
    const response = await transport(server.url).request({ method: "POST", path: "/op", body: {}, retry: "all" });
    expect(response.body).toEqual({ ok: 2 });
  });

  it("times out per call and aborts on the caller's signal", async () => {
    const server = await serve(() => undefined);
    const http = transport(server.url, { maxRetries: 0 });
    const timeout = await failure(http.request({ method: "GET", path: "/hang", timeoutMs: 50 }));
    expect(timeout).toBeInstanceOf(APITimeoutError);
    expect(timeout).toMatchObject({ isRetryable: true, timeoutMs: 50 });
    const controller = new AbortController();
    const pending = http.request({ method: "GET", path: "/hang", signal: controller.signal });
    controller.abort(new Error("user stopped"));
    const aborted = await failure(pending);
    expect(aborted).toBeInstanceOf(APIUserAbortError);
    expect((aborted as Error).message).toMatch(/user stopped/);
  });

  it("watches a signal shared by many calls with one listener, and aborts every call still in flight", async () => {
    const answers: Array<() => void> = [];
    const server = await serve((req, res) =>
      req.url === "/quick" ? json(res, 200, { ok: true }) : answers.push(() => json(res, 200, {})),
    );
    const http = transport(server.url, { maxRetries: 0 });
    const controller = new AbortController();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      // Finished calls leave the signal's list: the abort below reaches only the ones in flight.
      for (let i = 0; i < 3; i++)
        expect((await http.request({ method: "GET", path: "/quick", signal: controller.signal })).body).toEqual({
          ok: true,
        });
      const pending = Array.from({ length: 20 }, (_, i) =>
        failure(http.request({ method: "GET", path: `/hang-${i}`, signal: controller.signal })),
      );
      while (answers.length < 20) await new Promise((r) => setTimeout(r, 5));
      expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
      controller.abort(new Error("run stopped"));
      const errors = await Promise.all(pending);
      expect(errors.every((e) => e instanceof APIUserAbortError && /run stopped/.test(e.message))).toBe(true);
      expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
      // An aborted signal fails new calls at once, without sending them.
      expect(await failure(http.request({ method: "GET", path: "/late", signal: controller.signal }))).toBeInstanceOf(
        APIUserAbortError,
      );
      expect(server.seen.filter((s) => s.url === "/late")).toHaveLength(0);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("aborts calls in flight on close", async () => {
    const server = await serve(() => undefined);
    const http = new HttpTransport({ baseUrl: server.url });
    const outcome = failure(http.request({ method: "GET", path: "/hang" }));
    await new Promise((r) => setTimeout(r, 20));
    await http.close();
    expect(await outcome).toBeInstanceOf(APIUserAbortError);
  });

  it("keeps connections alive and shares one pool per origin", async () => {
    const server = await serve((_req, res) => json(res, 200, {}));
    const a = transport(server.url);
    const b = transport(`${server.url}/prefix`);
    for (let i = 0; i < 10; i++) await (i % 2 ? a : b).request({ method: "GET", path: "/x" });
    // Ten calls, one after another, on kept-alive connections. (undici's Pool may open a second
    // one when the next call is dispatched before it has seen the first connection free again.)
    expect(server.sockets()).toBeLessThanOrEqual(2);
    expect(server.seen.map((s) => s.url)).toContain("/prefix/x");
  });

  it("redacts the API key from errors, bodies, headers and log lines", async () => {
    const server = await serve((req, res) =>
      json(res, 500, { message: `your key ${String(req.headers["x-api-key"])} is odd` }),
    );
    const lines: string[] = [];
    const error = (await failure(
      transport(server.url, { maxRetries: 1, log: (l) => lines.push(l) }).request({ method: "GET", path: "/a" }),
    )) as APIError;
    const everything = [
      error.message,
      error.stack ?? "",
      JSON.stringify(error),
      JSON.stringify(error.body),
      JSON.stringify(error.requestHeaders),
      ...lines,
    ].join("\n");
    expect(everything).not.toContain(KEY);
    expect(error.requestHeaders["X-API-Key"]).toBe("***");
    expect(error.message).toContain("your key *** is odd");
  });
});

describe("backoff", () => {
  it("doubles from the initial delay up to the cap, jittered into [½, 1] of it", () => {
    const options = { initialDelayMs: 100, maxDelayMs: 1000 };
    expect([1, 2, 3, 4, 5].map((a) => backoffDelayMs(a, options, () => 1))).toEqual([100, 200, 400, 800, 1000]);
    expect(backoffDelayMs(3, options, () => 0)).toBe(200);
  });

  it("reads retry-after-ms, retry-after seconds and HTTP dates", () => {
    expect(retryAfterMs({ "retry-after-ms": "250", "retry-after": "9" })).toBe(250);
    expect(retryAfterMs({ "retry-after": "2" })).toBe(2000);
    expect(
      retryAfterMs({ "retry-after": "Wed, 21 Oct 2015 07:28:10 GMT" }, Date.parse("Wed, 21 Oct 2015 07:28:00 GMT")),
    ).toBe(10_000);
    expect(retryAfterMs({ "retry-after": "soon" })).toBeUndefined();
    expect(retryAfterMs({})).toBeUndefined();
  });
});
