/**
 * What keeps a web page from driving a server on this machine: a page the user visits can send
 * requests to `http://127.0.0.1:PORT` (cross-site request forgery), or make its own host name
 * resolve to 127.0.0.1 and then read the answers as its own (DNS rebinding). Three checks close
 * both, for `nexrl serve`, the agent gateway and `nexrl report --watch`:
 *
 * - the `Host` header must name the address the server is bound to (on loopback also `localhost`
 *   and the other loopback addresses), or a name the user allows (`--allow-host`); a server
 *   bound to every interface (`0.0.0.0`) accepts any name, since it is reachable by any anyway
 *   and protected by its API key;
 * - a browser's cross-origin request (an `Origin` other than the server's own) is refused unless
 *   the origin is allowed (`--cors ORIGIN`), which then also gets CORS answers and preflights;
 * - a request with a body must say it is JSON or protobuf: the content types a page may send
 *   without a preflight (`text/plain`, forms) are refused.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isIP } from "node:net";
import { isLoopback } from "./bind.js";
import { ProtocolError } from "../errors.js";

/** Options of {@link BrowserGuard}. */
export interface BrowserGuardOptions {
  /** The host the server was bound to (`127.0.0.1`, `::1`, `localhost`, `0.0.0.0`, a name). */
  boundHost: string;
  /** The addresses `boundHost` resolved to (an IP address is its own). */
  boundAddresses: readonly string[];
  /** More names the `Host` header may give (a proxy's or a container's name). */
  allowedHosts?: readonly string[];
  /** Origins (`https://app.example:3000`, or `*` for any) whose cross-origin requests are served, with CORS headers. */
  corsOrigins?: readonly string[];
  /** Names the server in messages (`nexrl serve`). */
  server: string;
}

/** Content types a request body may have: JSON (also `…+json`) and Tinker's protobuf. */
function isAcceptedBodyType(header: string | undefined): boolean {
  const type = header?.split(";")[0]?.trim().toLowerCase() ?? "";
  return (
    type === "application/json" ||
    type.endsWith("+json") ||
    type === "application/x-protobuf" ||
    type === "application/protobuf"
  );
}

/** The host name of a `Host` header value, lower-cased, without port or IPv6 brackets. */
function hostName(host: string): string {
  const trimmed = host.trim().toLowerCase();
  if (trimmed.startsWith("[")) return trimmed.slice(1, trimmed.indexOf("]"));
  const colon = trimmed.lastIndexOf(":");
  return colon >= 0 && trimmed.indexOf(":") === colon ? trimmed.slice(0, colon) : trimmed;
}

/** Whether the request carries a body: a length above 0, or a chunked one. */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}

const WILDCARDS = new Set(["0.0.0.0", "::", ""]);

/** Refusals are the client's fault; servers that answer in OpenAI's shape show them as such. */
const REFUSAL = { openaiType: "invalid_request_error" } as const;

/**
 * The checks against web pages that one server applies to each request before routing it (see
 * the module comment). {@link BrowserGuard.check} refuses with a {@link ProtocolError} (403
 * `forbidden_host` or `cross_origin_refused`, 415 `unsupported_media_type`), which the server
 * answers in its own error shape; it answers CORS preflights of allowed origins itself.
 */
export class BrowserGuard {
  private readonly anyHost: boolean;
  private readonly hosts: Set<string>;
  private readonly origins: Set<string>;

  /** @param options the bound host and its addresses, the names and origins allowed, the server's name. */
  constructor(private readonly options: BrowserGuardOptions) {
    this.anyHost = WILDCARDS.has(options.boundHost);
    const loopback = options.boundAddresses.length > 0 && options.boundAddresses.every(isLoopback);
    this.hosts = new Set(
      [
        options.boundHost,
        ...options.boundAddresses,
        ...(options.allowedHosts ?? []),
        ...(loopback ? ["localhost"] : []),
      ].map((h) => hostName(isIP(h) === 6 ? `[${h}]` : h)),
    );
    this.origins = new Set((options.corsOrigins ?? []).map((o) => o.replace(/\/+$/, "").toLowerCase()));
  }

  /**
   * Checks `req`; resolves true when it answered the request itself (a CORS preflight), false
   * when the request may go on to the server's routes (with CORS headers set on `res` for an
   * allowed origin).
   * @throws {@link ProtocolError} when the request is refused.
   */
  check(req: IncomingMessage, res: ServerResponse): boolean {
    const host = req.headers.host;
    if (host !== undefined && !this.hostAllowed(hostName(host)))
      throw new ProtocolError(
        `${this.options.server} does not answer requests for the host \`${host}\` (a page that made its own name point at this machine could read the answers); ` +
          `call it by the address it listens on (${this.options.boundHost}), or start it with --allow-host ${hostName(host)}`,
        { status: 403, code: "forbidden_host", ...REFUSAL },
      );
    const origin = req.headers.origin;
    const allowed = origin !== undefined && this.originAllowed(origin);
    if (origin !== undefined && !allowed && !this.sameOrigin(origin, host))
      throw new ProtocolError(
        `${this.options.server} refuses requests a web page at ${origin} sends (cross-origin); start it with --cors ${origin} to allow that origin`,
        { status: 403, code: "cross_origin_refused", ...REFUSAL },
      );
    if (allowed) {
      res.setHeader("access-control-allow-origin", origin);
      res.setHeader("vary", "Origin");
      if (req.method === "OPTIONS") {
        res.writeHead(204, {
          "access-control-allow-methods": "GET, POST, PUT, DELETE, OPTIONS",
          "access-control-allow-headers":
            req.headers["access-control-request-headers"] ?? "content-type, authorization",
          "access-control-max-age": "600",
        });
        res.end();
        return true;
      }
    }
    if (hasBody(req) && !isAcceptedBodyType(req.headers["content-type"]))
      throw new ProtocolError(
        `${this.options.server} takes JSON bodies (and Tinker's protobuf): send the header Content-Type: application/json` +
          (req.headers["content-type"] ? ` instead of ${req.headers["content-type"]}` : ""),
        { status: 415, code: "unsupported_media_type", ...REFUSAL },
      );
    return false;
  }

  private hostAllowed(name: string): boolean {
    if (this.anyHost || this.hosts.has(name)) return true;
    // On loopback, every loopback address reaches the same server (127.0.0.2 is 127.0.0.1's neighbour).
    return this.hosts.has("localhost") && isIP(name) !== 0 && isLoopback(name);
  }

  private originAllowed(origin: string): boolean {
    return this.origins.has("*") || this.origins.has(origin.toLowerCase());
  }

  /** A page served by this very server (the report's own page): its origin names the host the request was sent to. */
  private sameOrigin(origin: string, host: string | undefined): boolean {
    if (host === undefined) return false;
    try {
      const url = new URL(origin);
      return url.protocol === "http:" && url.host.toLowerCase() === host.trim().toLowerCase();
    } catch {
      return false;
    }
  }
}
