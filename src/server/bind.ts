/**
 * Binding a server's address: which addresses a `--host` names, whether they are loopback
 * (reachable from this machine only), and listening with failures that say their cause — the
 * port is taken, needs privileges, or the host is not an address of this machine.
 *
 * @module
 */
import { lookup } from "node:dns/promises";
import type { Server } from "node:http";
import { isIP } from "node:net";
import { ListenError, type ListenProblem } from "../errors.js";

/** Error codes of a host that names no address of this machine. */
const BAD_HOST_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_FAIL", "EAI_NONAME", "EADDRNOTAVAIL"]);

function problemOf(code: string | undefined): ListenProblem {
  if (code === "EADDRINUSE") return "address_in_use";
  if (code === "EACCES" || code === "EPERM") return "permission_denied";
  return code !== undefined && BAD_HOST_CODES.has(code) ? "bad_host" : "other";
}

/** The message of a listen failure, before the caller's hint. */
function describe(problem: ListenProblem, host: string, port: number, error: NodeJS.ErrnoException): string {
  switch (problem) {
    case "address_in_use":
      return `port ${port} on ${host} is already in use`;
    case "permission_denied":
      return `no permission to listen on port ${port} of ${host} (ports below 1024 need root or CAP_NET_BIND_SERVICE)`;
    case "bad_host":
      return error.code === "EADDRNOTAVAIL"
        ? `cannot listen on ${host}: no network interface of this machine has that address`
        : `cannot listen on ${host}: it is not an IP address, and no host of that name resolves (${error.code})`;
    case "other":
      return `cannot listen on ${host}:${port}: ${error.message}`;
  }
}

/**
 * The addresses `host` names (an IP address itself, or what the resolver gives for a name).
 * @throws {@link "nexrl/errors".ListenError | ListenError} `bad_host` when a name does not resolve.
 */
export async function hostAddresses(host: string, hint: (problem: ListenProblem) => string): Promise<string[]> {
  if (isIP(host) !== 0) return [host];
  try {
    return (await lookup(host, { all: true })).map((a) => a.address);
  } catch (error) {
    const problem = problemOf((error as NodeJS.ErrnoException).code);
    throw new ListenError(`${describe(problem, host, 0, error as NodeJS.ErrnoException)}; ${hint(problem)}`, {
      code: problem,
      cause: error,
    });
  }
}

/** True for an address only this machine can reach: 127.0.0.0/8, `::1` (also IPv4-mapped). */
export function isLoopback(address: string): boolean {
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return (isIP(v4) === 4 && v4.startsWith("127.")) || address === "::1";
}

/**
 * Starts `server` listening on `host`:`port`.
 * @param hint what to do about each kind of failure, appended to the message.
 * @throws {@link "nexrl/errors".ListenError | ListenError} naming the cause.
 */
export function listen(
  server: Server,
  port: number,
  host: string,
  hint: (problem: ListenProblem) => string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException): void => {
      const problem = problemOf(error.code);
      reject(
        new ListenError(`${describe(problem, host, port, error)}; ${hint(problem)}`, { code: problem, cause: error }),
      );
    };
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
}
