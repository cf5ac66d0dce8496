import { describe, expect, it } from "vitest";
import { JwtIssuer } from "../../../src/server/tinker-jwt.js";
import { TinkerTrainingService, type TinkerServiceOptions } from "../../../src/backends/index.js";
import { JwtCredential, jwtExpiry } from "../../../src/backends/tinker/jwt.js";
import { adamParams, modelInputFromTokens } from "../../../src/wire/wire.js";
import { call } from "../../support/server.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum } from "../../support/training.js";
import { proxy, type ProxiedRequest } from "./proxy.js";
import { RemoteOperationError } from "../../../src/errors.js";

function service(baseUrl: string, options: Partial<TinkerServiceOptions> = {}) {
  const svc = new TinkerTrainingService({ baseUrl, apiKey: API_KEY, ...FAST, env: {}, ...options });
  onCleanup(() => svc.close());
  return svc;
}

/** Trains one step and samples once. */
async function oneStep(svc: TinkerTrainingService) {
  const training = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
  const fb = await (await training.forwardBackward([sftDatum("abc")], "cross_entropy")).result();
  await (await training.optimStep(adamParams({ learningRate: 0.01 }))).result();
  const sampler = await svc.createSamplingClient((await (await training.saveWeightsForSampler("s")).result()).path);
  await (await sampler.sample(modelInputFromTokens([256, 97]), 1, { maxTokens: 2, seed: 1 })).result();
  return { training, fb };
}

const keyOf = (r: { headers: Record<string, unknown> }) => r.headers["x-api-key"] as string;

describe("tinker JWTs (pjwt_auth_enabled)", () => {
  it("trades the API key for a JWT and sends the JWT on every call but the flags and the exchange", async () => {
    for (const wire of ["json", "protobuf"] as const) {
      const server = await serve({
        protocol: "tinker",
        apiKey: API_KEY,
        tinkerClientConfig: { pjwt_auth_enabled: true },
      });
      const svc = service(server.url, { wire });
      await oneStep(svc);
      expect((await svc.negotiated()).flags.pjwt_auth_enabled).toBe(true);
      const byKey = server.requests.filter((r) => keyOf(r) === API_KEY).map((r) => r.path);
      expect(byKey, wire).toEqual(["/api/v1/client/config", "/api/v1/auth/token"]);
      const jwts = new Set(server.requests.filter((r) => keyOf(r) !== API_KEY).map(keyOf));
      expect(jwts.size, wire).toBe(1);
      const [jwt] = [...jwts];
      expect(jwt).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
      expect(jwtExpiry(jwt!)! - Date.now()).toBeGreaterThan(3500_000);
    }
  });

  it("refreshes the JWT when a call finds it within a minute of expiry, over HTTP", async () => {
    const server = await serve({
      protocol: "tinker",
      tinkerClientConfig: { pjwt_auth_enabled: true },
      tinkerJwtTtlSeconds: 600,
    });
    let clock = Date.now();
    const svc = service(server.url, { wire: "protobuf", now: () => clock });
    const { training } = await oneStep(svc);
    const exchanges = () => server.requests.filter((r) => r.path === "/api/v1/auth/token").length;
    expect(exchanges()).toBe(1);
    clock += 530_000; // 70 s left: still fresh enough
    await (await training.forward([sftDatum("abc")], "cross_entropy")).result();
    expect(exchanges()).toBe(1);
    const first = keyOf(server.requests.at(-1)!);
    clock += 20_000; // 50 s left: refreshed before the next call goes out
    const from = server.requests.length;
    await (await training.forward([sftDatum("abc")], "cross_entropy")).result();
    expect(exchanges()).toBeGreaterThanOrEqual(2);
    const sent = server.requests.slice(from).filter((r) => r.path !== "/api/v1/auth/token");
    expect(sent[0]!.path).toBe("/api/v1/forward_backward");
    expect(sent.every((r) => keyOf(r) !== first && keyOf(r) !== API_KEY)).toBe(true);
  });

  it("keeps one JWT until a minute before its expiry, shares one refresh among concurrent calls, and falls back to the current JWT when a refresh fails", async () => {
    let clock = 0;
    let issued = 0;
    let failNext = false;
    const jwtFor = (exp: number) =>
      `eyJhbGciOiJIUzI1NiJ9.${Buffer.from(JSON.stringify({ exp, n: ++issued })).toString("base64url")}.sig`;
    const lines: string[] = [];
    const credential = new JwtCredential({
      exchange: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        if (failNext) throw new Error("auth service down");
        return jwtFor(clock / 1000 + 600);
      },
      now: () => clock,
      log: (l) => lines.push(l),
    });
    onCleanup(async () => credential.stop());
    await credential.start();
    const a = await credential.token();
    clock = 539_000; // 61 s left
    expect(await credential.token()).toBe(a);
    clock = 541_000; // 59 s left
    const [b, c] = await Promise.all([credential.token(), credential.token()]);
    expect(b).toBe(c);
    expect(b).not.toBe(a);
    expect(credential.exchanges).toBe(2);
    clock += 560_000;
    failNext = true;
    expect(await credential.token()).toBe(b);
    expect(lines[0]).toMatch(/refreshing the JWT failed \(auth service down\); using the current one/);
    expect(jwtExpiry(b)).toBe(541_000 + 600_000);
  });

  it("on the server: no JWT, a forged one or an expired one is refused with 401", async () => {
    const server = await serve({
      protocol: "tinker",
      apiKey: API_KEY,
      tinkerClientConfig: { pjwt_auth_enabled: true },
    });
    const session = { tags: [], sdk_version: "0.25.0", type: "create_session" };
    const noJwt = await call(server.url, "POST", "/api/v1/create_session", session, { "x-api-key": API_KEY });
    expect([noJwt.status, noJwt.body.error]).toEqual([401, "invalid_jwt"]);
    expect((await call(server.url, "POST", "/api/v1/auth/token", {}, { "x-api-key": "tml-wrong" })).status).toBe(401);
    const { body } = await call(server.url, "POST", "/api/v1/auth/token", {}, { "x-api-key": API_KEY });
    const ok = await call(server.url, "POST", "/api/v1/create_session", session, { "x-api-key": body.jwt });
    expect(ok.status).toBe(200);
    const forged = `${body.jwt.split(".").slice(0, 2).join(".")}.${"A".repeat(43)}`;
    expect((await call(server.url, "POST", "/api/v1/create_session", session, { "x-api-key": forged })).status).toBe(
      401,
    );
    let clock = 1_000_000;
    const issuer = new JwtIssuer(60, () => clock);
    const jwt = issuer.issue();
    expect(issuer.verify(jwt)).toBe("valid");
    clock += 61_000;
    expect(issuer.verify(jwt)).toBe("expired");
    expect(issuer.verify(`${jwt}x`)).toBe("invalid");
    expect(issuer.verify(undefined)).toBe("invalid");
    // Without JWTs on, there is no exchange.
    const plain = await serve({ protocol: "tinker" });
    expect((await call(plain.url, "POST", "/api/v1/auth/token", {})).status).toBe(404);
  });
});

describe("tinker billing pauses (402)", () => {
  const PAYMENT = { detail: "Payment required: the balance of org acme is exhausted" };

  it("waits out 402 answers to submissions and polls, then carries on", async () => {
    const server = await serve({ protocol: "tinker" });
    const counts: Record<string, number> = {};
    const url = await proxy(server.url, (request: ProxiedRequest) => {
      const n = (counts[request.path] = (counts[request.path] ?? 0) + 1);
      if (request.path === "/api/v1/forward_backward" && n <= 2) return { status: 402, body: PAYMENT };
      if (request.path === "/api/v1/retrieve_future" && n === 2) return { status: 402, body: PAYMENT };
      return undefined;
    });
    const lines: string[] = [];
    const svc = service(url, { wire: "protobuf", billingRetryMs: 1, log: (l) => lines.push(l) });
    const { fb } = await oneStep(svc);
    expect(fb.lossFnOutputs[0]!.logprobs).toHaveLength(4);
    expect(counts["/api/v1/forward_backward"]).toBe(3);
    expect(server.requests.filter((r) => r.path === "/api/v1/forward_backward")).toHaveLength(1);
    expect(lines.filter((l) => l.includes("paused this account for billing"))).toHaveLength(1);
    expect(lines[0]).toContain("balance of org acme is exhausted");
    expect(lines[0]).toContain("3600 s");
  });

  it("gives up once the 402s outlast billing_exception_max_pause_duration_sec, with the server's words", async () => {
    const server = await serve({
      protocol: "tinker",
      tinkerClientConfig: { billing_exception_max_pause_duration_sec: 2 },
    });
    let clock = 0;
    let refused = 0;
    const url = await proxy(server.url, (request) => {
      if (request.path !== "/api/v1/forward_backward") return undefined;
      refused++;
      clock += 1000; // each 402 comes a second after the last
      return { status: 402, body: PAYMENT };
    });
    const svc = service(url, { wire: "json", billingRetryMs: 1, now: () => clock });
    const training = await svc.createTrainingClient({ baseModel: "tiny" });
    const failure = training.forwardBackward([sftDatum("abc")], "cross_entropy");
    await expect(failure).rejects.toThrow(RemoteOperationError);
    await expect(failure).rejects.toThrow(
      /balance of org acme is exhausted[\s\S]*answered 402 for 3 s, longer than the 2 s/,
    );
    // 402s at 1, 2, 3 s are waited out (the incident began at 1 s); the one at 4 s ends it.
    expect(refused).toBe(4);
  });
});
