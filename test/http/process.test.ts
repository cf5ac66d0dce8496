import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { json, testServer } from "../support/http-server.js";

const run = promisify(execFile);
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

describe("HttpTransport in a process of its own", () => {
  it("keeps the process alive while it waits to retry, so a script's await completes", async () => {
    let n = 0;
    const server = await testServer((_req, res) =>
      n++ === 0 ? json(res, 503, { message: "busy" }, { "retry-after-ms": "300" }) : json(res, 200, { ok: true }),
    );
    cleanups.push(server.close);
    const transport = path.resolve("src/http/index.ts");
    const code = `import { HttpTransport } from ${JSON.stringify(transport)};
const http = new HttpTransport({ baseUrl: ${JSON.stringify(server.url)} });
const { body } = await http.request({ method: "GET", path: "/x" });
console.log(JSON.stringify(body));
await http.close();`;
    const { stdout } = await run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      cwd: path.resolve("."),
    });
    expect(stdout.trim()).toBe('{"ok":true}');
    expect(n).toBe(2);
  });
});
