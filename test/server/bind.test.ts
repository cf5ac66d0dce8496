/**
 * Binding `nexrl serve`'s address in process: the addresses a host names, which are loopback, and
 * listen failures that say their cause (a taken port, an address of no interface here, a name
 * that does not resolve) with the caller's hint.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ListenError, type ListenProblem } from "../../src/errors.js";
import { hostAddresses, isLoopback, listen } from "../../src/server/bind.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((s) => new Promise((resolve) => (s.listening ? s.close(resolve) : resolve(undefined)))),
  );
});

const hint = (problem: ListenProblem): string => `hint for ${problem}`;

function server(): Server {
  const s = createServer((_req, res) => res.end("ok"));
  servers.push(s);
  return s;
}

/** The ListenError `promise` rejects with. */
async function listenError(promise: Promise<unknown>): Promise<ListenError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ListenError);
  return error as ListenError;
}

describe("hostAddresses and isLoopback", () => {
  it("gives an IP address as it is, resolves a name, and refuses a name that resolves to nothing", async () => {
    expect(await hostAddresses("127.0.0.1", hint)).toEqual(["127.0.0.1"]);
    expect(await hostAddresses("::1", hint)).toEqual(["::1"]);
    const local = await hostAddresses("localhost", hint);
    expect(local.length).toBeGreaterThan(0);
    expect(local.every(isLoopback)).toBe(true);
    const error = await listenError(hostAddresses("no-such-host.invalid", hint));
    expect(error.problem).toBe("bad_host");
    expect(error.message).toMatch(
      /^cannot listen on no-such-host\.invalid: it is not an IP address, and no host of that name resolves \((ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL)\); hint for bad_host$/,
    );
  });

  it("counts 127.0.0.0/8 and ::1 (also IPv4-mapped) as loopback, and nothing else", () => {
    expect(["127.0.0.1", "127.4.5.6", "::1", "::ffff:127.0.0.1"].map(isLoopback)).toEqual([true, true, true, true]);
    expect(["0.0.0.0", "10.0.0.1", "::", "::ffff:10.0.0.1", "128.0.0.1", "localhost"].map(isLoopback)).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});

describe("listen", () => {
  it("listens, then names a taken port and an address of no interface of this machine", async () => {
    const first = server();
    await listen(first, 0, "127.0.0.1", hint);
    const { port } = first.address() as AddressInfo;
    expect(port).toBeGreaterThan(0);
    const second = server();
    const taken = await listenError(listen(second, port, "127.0.0.1", hint));
    expect([taken.problem, taken.message]).toEqual([
      "address_in_use",
      `port ${port} on 127.0.0.1 is already in use; hint for address_in_use`,
    ]);
    expect((taken.cause as NodeJS.ErrnoException).code).toBe("EADDRINUSE");
    // The failed server can listen again once the port is free: listen left no stale handler.
    await new Promise((resolve) => first.close(resolve));
    await listen(second, port, "127.0.0.1", hint);
    expect((second.address() as AddressInfo).port).toBe(port);

    // 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine.
    const elsewhere = await listenError(listen(server(), 0, "192.0.2.1", hint));
    expect([elsewhere.problem, elsewhere.message]).toEqual([
      "bad_host",
      "cannot listen on 192.0.2.1: no network interface of this machine has that address; hint for bad_host",
    ]);
  });
});
