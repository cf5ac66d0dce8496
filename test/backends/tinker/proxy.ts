import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { onCleanup } from "../../support/training.js";

/** A request as the proxy received it. */
export interface ProxiedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** An answer the proxy gives itself instead of forwarding. */
export interface Injected {
  status: number;
  body: unknown;
}

/** An answer forwarded from the server. */
export interface ProxiedAnswer {
  status: number;
  contentType: string;
  body: Buffer;
}

/**
 * A loopback HTTP proxy in front of `target` (a `nexrl serve`), closed after the test:
 * `inject` may answer a request itself (a fault the server does not make, such as 402);
 * `observe` sees each forwarded request with its answer.
 */
export async function proxy(
  target: string,
  inject: (request: ProxiedRequest) => Injected | undefined = () => undefined,
  observe: (request: ProxiedRequest, answer: ProxiedAnswer) => void = () => undefined,
): Promise<string> {
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const request: ProxiedRequest = {
        method: req.method ?? "GET",
        path: req.url ?? "/",
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      const injected = inject(request);
      if (injected) {
        const text = JSON.stringify(injected.body);
        res.writeHead(injected.status, { "content-type": "application/json" });
        res.end(text);
        return;
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers))
        if (typeof value === "string" && !["host", "connection", "content-length"].includes(name))
          headers[name] = value;
      const answer = await fetch(target + request.path, {
        method: request.method,
        headers,
        ...(request.body.length > 0 && { body: request.body }),
      });
      const body = Buffer.from(await answer.arrayBuffer());
      const contentType = answer.headers.get("content-type") ?? "";
      observe(request, { status: answer.status, contentType, body });
      res.writeHead(answer.status, { "content-type": contentType });
      res.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onCleanup(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
