/**
 * Web pages cannot drive the servers on this machine: `nexrl serve`, the agent gateway and
 * `nexrl report --watch` refuse foreign `Host` headers (DNS rebinding), browsers' cross-origin
 * requests unless `--cors` allows the origin, and bodies a page may send without a preflight.
 * Requests go out through `node:http`, which (unlike fetch) lets a test set `Host` as a page's
 * browser would after rebinding.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AgentGateway } from "../../src/agent/index.js";
import { serveReport } from "../../src/report/watch.js";
import { server } from "../support/server.js";

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Sends one request to `base` with exactly `headers` (Host included when given). */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Raw> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        headers: { ...headers, ...(body !== undefined && { "content-length": String(Buffer.byteLength(body)) }) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const JSON_TYPE = { "content-type": "application/json" };
const SESSION = JSON.stringify({ tags: [], sdk_version: "0.25.0", type: "create_session" });

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

describe("nexrl serve against web pages", () => {
  it("answers its own address and localhost, and refuses other Host names with 403", async () => {
    const { url } = await server({ protocol: "tinker" });
    const port = new URL(url).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `127.0.0.2:${port}`]) {
      const ok = await send(url, "POST", "/api/v1/create_session", { ...JSON_TYPE, host }, SESSION);
      expect(ok.status, host).toBe(200);
    }
    const rebound = await send(
      url,
      "POST",
      "/api/v1/create_session",
      { ...JSON_TYPE, host: `attacker.example:${port}` },
      SESSION,
    );
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.text)).toMatchObject({ error: "forbidden_host" });
    expect(JSON.parse(rebound.text).message).toContain("--allow-host attacker.example");
    // Health checks are guarded too: a rebound page learns nothing.
    expect((await send(url, "GET", "/health", { host: `attacker.example:${port}` })).status).toBe(403);
  });

  it("answers names given with allowedHosts", async () => {
    const { url } = await server({ protocol: "tinker", allowedHosts: ["nexrl.internal"] });
    const answer = await send(
      url,
      "POST",
      "/api/v1/create_session",
      { ...JSON_TYPE, host: "nexrl.internal:8000" },
      SESSION,
    );
    expect(answer.status).toBe(200);
    const other = await send(url, "POST", "/api/v1/create_session", { ...JSON_TYPE, host: "other.internal" }, SESSION);
    expect(other.status).toBe(403);
  });

  it("refuses a browser's cross-origin request and the body types a page may send without asking", async () => {
    const { url } = await server({ protocol: "tinker" });
    const host = new URL(url).host;
    const foreign = await send(
      url,
      "POST",
      "/api/v1/create_session",
      { ...JSON_TYPE, host, origin: "https://attacker.example" },
      SESSION,
    );
    expect(foreign.status).toBe(403);
    expect(JSON.parse(foreign.text)).toMatchObject({ error: "cross_origin_refused" });
    expect(JSON.parse(foreign.text).message).toContain("--cors https://attacker.example");
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const simple = await send(url, "POST", "/api/v1/create_session", { "content-type": type, host }, SESSION);
      expect(simple.status, type).toBe(415);
      expect(JSON.parse(simple.text).message).toContain("Content-Type: application/json");
    }
    const untyped = await send(url, "POST", "/api/v1/create_session", { host }, SESSION);
    expect(untyped.status).toBe(415);
    // A page of the server's own origin is not cross-origin.
    const own = await send(url, "POST", "/api/v1/create_session", { ...JSON_TYPE, host, origin: url }, SESSION);
    expect(own.status).toBe(200);
  });

  it("serves an allowed origin with CORS headers and answers its preflight", async () => {
    const origin = "http://localhost:3000";
    const { url } = await server({ protocol: "openai", corsOrigins: [origin] });
    const host = new URL(url).host;
    const preflight = await send(url, "OPTIONS", "/v1/models", {
      host,
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type, authorization",
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe(origin);
    expect(preflight.headers["access-control-allow-headers"]).toBe("content-type, authorization");
    const models = await send(url, "GET", "/v1/models", { host, origin });
    expect(models.status).toBe(200);
    expect(models.headers["access-control-allow-origin"]).toBe(origin);
    expect(JSON.parse(models.text).object).toBe("list");
    const other = await send(url, "GET", "/v1/models", { host, origin: "http://localhost:3001" });
    expect(other.status).toBe(403);
  });
});

describe("the agent gateway against web pages", () => {
  it("refuses foreign hosts, origins and body types in OpenAI's error shape", async () => {
    const gateway = await AgentGateway.start({ unref: true });
    closers.push(() => gateway.close());
    const host = new URL(gateway.url).host;
    const claim = JSON.stringify({ wait_seconds: 0 });
    expect((await send(gateway.url, "POST", "/tasks/claim", { ...JSON_TYPE, host }, claim)).status).toBe(204);
    const rebound = await send(gateway.url, "POST", "/tasks/claim", { ...JSON_TYPE, host: "attacker.example" }, claim);
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.text)).toMatchObject({
      error: { type: "invalid_request_error", code: "forbidden_host" },
    });
    const foreign = await send(
      gateway.url,
      "POST",
      "/tasks/claim",
      { ...JSON_TYPE, host, origin: "https://attacker.example" },
      claim,
    );
    expect(JSON.parse(foreign.text)).toMatchObject({ error: { code: "cross_origin_refused" } });
    const plain = await send(gateway.url, "POST", "/tasks/claim", { "content-type": "text/plain", host }, claim);
    expect(plain.status).toBe(415);
  });

  it("answers allowed hosts and origins", async () => {
    const gateway = await AgentGateway.start({
      unref: true,
      allowedHosts: ["host.docker.internal"],
      corsOrigins: ["*"],
    });
    closers.push(() => gateway.close());
    const answer = await send(gateway.url, "GET", "/healthz", {
      host: "host.docker.internal:1234",
      origin: "https://notebook.example",
    });
    expect(answer.status).toBe(200);
    expect(answer.headers["access-control-allow-origin"]).toBe("https://notebook.example");
  });
});

describe("nexrl report --watch against web pages", () => {
  it("serves its own page and data, and refuses a rebound host or a foreign page", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-guard-"));
    closers.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "metrics.jsonl"), `${JSON.stringify({ step: 1, "train/loss": 1.5 })}\n`);
    const report = await serveReport(dir, { intervalMs: 200 });
    closers.push(() => report.close());
    const host = new URL(report.url).host;
    expect((await send(report.url, "GET", "/data.json", { host })).status).toBe(200);
    expect((await send(report.url, "GET", "/data.json", { host, origin: report.url.replace(/\/$/, "") })).status).toBe(
      200,
    );
    const rebound = await send(report.url, "GET", "/data.json", { host: "attacker.example" });
    expect(rebound.status).toBe(403);
    expect(rebound.text).toContain("--allow-host");
    expect((await send(report.url, "GET", "/data.json", { host, origin: "https://attacker.example" })).status).toBe(
      403,
    );
  });
});

describe("the work of one request is capped", () => {
  it("refuses /v1/completions whose prompts × n exceed 128 sequences, naming both", async () => {
    const { url } = await server({ protocol: "openai" });
    const host = new URL(url).host;
    const body = (prompts: number, n: number) =>
      JSON.stringify({ model: "tiny", prompt: Array.from({ length: prompts }, () => "a"), n, max_tokens: 1 });
    const refused = await send(url, "POST", "/v1/completions", { ...JSON_TYPE, host }, body(1000, 128));
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text).error).toMatchObject({ code: "too_many_samples", param: "prompt" });
    expect(JSON.parse(refused.text).error.message).toContain("1000 prompts × n 128 = 128000 sequences");
    const within = await send(url, "POST", "/v1/completions", { ...JSON_TYPE, host }, body(2, 64));
    expect(within.status).toBe(200);
    expect(JSON.parse(within.text).choices).toHaveLength(128);
  });

  it("refuses a Tinker JSON body over 64 MiB with 413 as soon as it has read that much", async () => {
    const { url } = await server({ protocol: "tinker" });
    const target = new URL("/api/v1/create_session", url);
    // The body is streamed until the answer comes: a server that stops reading at the cap answers
    // then, while the client still has bytes to send.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": String(65 * 2 ** 20) },
      });
      let answered = false;
      req.on("response", (res) => {
        answered = true;
        resolve(res.statusCode!);
        res.resume();
        req.destroy();
      });
      req.on("error", (error) => (answered ? undefined : reject(error)));
      const chunk = Buffer.alloc(2 ** 20, 0x20);
      const pump = (): void => {
        while (!answered && req.write(chunk));
        if (!answered) req.once("drain", pump);
      };
      pump();
    });
    expect(status).toBe(413);
  });
});

describe("an API key that other machines could guess", () => {
  it("warns when a server reachable from other machines has a short key, and not for a long one", async () => {
    const lines: string[] = [];
    await server({ protocol: "openai", host: "0.0.0.0", apiKey: "k", log: (line) => lines.push(line) });
    expect(lines.filter((l) => l.includes("API key is"))).toEqual([
      "warning: the API key is 1 character long, which anyone who can reach 0.0.0.0 could guess; use at least 16 random characters (openssl rand -hex 16 makes 32)",
    ]);
    lines.length = 0;
    await server({
      protocol: "openai",
      host: "0.0.0.0",
      apiKey: "0123456789abcdef0123456789abcdef",
      log: (l) => lines.push(l),
    });
    await server({ protocol: "openai", apiKey: "k", log: (l) => lines.push(l) });
    expect(lines.filter((l) => l.includes("API key is"))).toEqual([]);
  });
});
