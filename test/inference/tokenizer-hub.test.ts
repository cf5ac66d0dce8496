import { readFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { downloadTokenizer, HfTokenizer, loadTokenizer } from "../../src/inference/index.js";
import { QWEN3_FILES_DIR } from "../support/qwen.js";
import { ConfigError } from "../../src/errors.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((f) => f()));
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-hub-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

interface FakeHub {
  endpoint: string;
  requests: Array<{ url: string; authorization: string | undefined }>;
  server: Server;
}

function close(server: Server): Promise<unknown> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}

/** A loopback server answering the Hub's `/<id>/resolve/<revision>/<file>` with Qwen3's files, or `status`. */
async function fakeHub(status = 200): Promise<FakeHub> {
  const requests: FakeHub["requests"] = [];
  const server = createServer(
    (req, res) =>
      void (async () => {
        requests.push({ url: req.url ?? "", authorization: req.headers.authorization });
        const match = /^\/Qwen\/Qwen3-0\.6B\/resolve\/main\/(tokenizer\.json|tokenizer_config\.json)$/.exec(
          req.url ?? "",
        );
        if (status !== 200 || !match) {
          res.writeHead(status === 200 ? 404 : status).end("{}");
          return;
        }
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(await readFile(join(QWEN3_FILES_DIR, match[1]!)));
      })(),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => close(server));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
}

describe("Hub tokenizers", () => {
  it("downloads the files once into the cache folder and reads them from there afterwards", async () => {
    const hub = await fakeHub();
    const cacheDir = await tempDir();
    const tok = await loadTokenizer("Qwen/Qwen3-0.6B", { endpoint: hub.endpoint, cacheDir, token: "hf_secret_token" });
    expect(tok).toBeInstanceOf(HfTokenizer);
    expect(tok.encode("Hello world")).toEqual([9707, 1879]);
    expect(hub.requests.map((r) => r.url).sort()).toEqual([
      "/Qwen/Qwen3-0.6B/resolve/main/chat_template.jinja",
      "/Qwen/Qwen3-0.6B/resolve/main/tokenizer.json",
      "/Qwen/Qwen3-0.6B/resolve/main/tokenizer_config.json",
    ]);
    expect(hub.requests.every((r) => r.authorization === "Bearer hf_secret_token")).toBe(true);
    const folder = join(cacheDir, "Qwen", "Qwen3-0.6B", "main");
    expect((await readdir(folder)).sort()).toEqual(["tokenizer.json", "tokenizer_config.json"]);

    await close(hub.server);
    expect(await downloadTokenizer("Qwen/Qwen3-0.6B", { endpoint: hub.endpoint, cacheDir })).toBe(folder);
    expect(
      (await loadTokenizer("Qwen/Qwen3-0.6B", { endpoint: hub.endpoint, cacheDir })).encode("Hello world"),
    ).toEqual([9707, 1879]);
    expect(hub.requests).toHaveLength(3);
  });

  it("explains how to work offline when the Hub cannot be reached, without printing the token", async () => {
    const hub = await fakeHub();
    await close(hub.server);
    const cacheDir = await tempDir();
    const error = await downloadTokenizer("Qwen/Qwen3-0.6B", {
      endpoint: hub.endpoint,
      cacheDir,
      token: "hf_secret_token",
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(
      `cannot download ${hub.endpoint}/Qwen/Qwen3-0.6B/resolve/main/tokenizer.json (ECONNREFUSED)`,
    );
    expect(message).toContain("this machine may be offline");
    expect(message).toContain(join(cacheDir, "Qwen", "Qwen3-0.6B", "main"));
    expect(message).not.toContain("hf_secret_token");
    expect(await readdir(cacheDir)).toEqual([]);
  });

  it("names the cause of HTTP failures: unknown model, gated model", async () => {
    const cacheDir = await tempDir();
    const missing = await fakeHub();
    await expect(downloadTokenizer("Qwen/Nope", { endpoint: missing.endpoint, cacheDir })).rejects.toThrow(
      /HTTP 404; check the model id and revision "main"/,
    );
    const gated = await fakeHub(401);
    await expect(downloadTokenizer("meta-llama/Llama-3.2-1B", { endpoint: gated.endpoint, cacheDir })).rejects.toThrow(
      /HTTP 401; the model is gated or private: .*HF_TOKEN/,
    );
    await expect(
      downloadTokenizer("Qwen/Qwen3-0.6B", { endpoint: missing.endpoint, cacheDir, revision: "../x" }),
    ).rejects.toThrow(/revision "\.\.\/x" must be/);
    await expect(downloadTokenizer("../etc", { endpoint: missing.endpoint, cacheDir })).rejects.toThrow(
      /neither a tokenizer folder nor a Hugging Face model id/,
    );
  });
});
