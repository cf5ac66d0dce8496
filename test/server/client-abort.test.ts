/**
 * A client that goes away mid-request is its own choice, not a failure of the server: nothing is
 * logged (before, every abort was logged as a failure with a stack), and the server answers the
 * next request as usual.
 */
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { AgentGateway } from "../../src/agent/index.js";
import { server } from "../support/server.js";

/** Sends the head of a POST and a part of its body, then closes the connection. */
async function abortMidBody(base: string, path: string): Promise<void> {
  const url = new URL(base);
  const socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model": "tiny",`,
  );
  await sleep(50);
  socket.destroy();
  await sleep(100);
}

describe("clients that abort", () => {
  it("nexrl serve logs nothing for a request whose client left mid-body, on every protocol", async () => {
    const lines: string[] = [];
    const { url } = await server({ log: (line) => lines.push(line) });
    for (const path of ["/api/v1/create_session", "/api/v1/sessions", "/v1/chat/completions"])
      await abortMidBody(url, path);
    expect(lines).toEqual([]);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });

  it("the agent gateway logs nothing either", async () => {
    const lines: string[] = [];
    const gateway = await AgentGateway.start({ unref: true, log: (line) => lines.push(line) });
    try {
      await abortMidBody(gateway.url, "/tasks/claim");
      expect(lines).toEqual([]);
    } finally {
      await gateway.close();
    }
  });
});
