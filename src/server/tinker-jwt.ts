/**
 * JWTs for `nexrl serve --protocol tinker` when its `client/config` sets `pjwt_auth_enabled`:
 * `POST /api/v1/auth/token` trades the API key for a short-lived JWT (HS256, signed with a key
 * made when the server starts), and every other call must then carry a valid, unexpired one in
 * `X-API-Key`, as the Tinker SDK sends it.
 *
 * @module
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

const HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");

/** The credential a Tinker client sends: the `X-API-Key` header (the API key, or a JWT once exchanged). */
export function tinkerCredential(req: IncomingMessage): string | undefined {
  const given = req.headers["x-api-key"];
  return Array.isArray(given) ? given[0] : given;
}

/** What {@link JwtIssuer.verify} found. */
export type JwtCheck = "valid" | "expired" | "invalid";

/** Issues and checks the JWTs of one server. */
export class JwtIssuer {
  private readonly key = randomBytes(32);
  /** JWTs issued so far. */
  issued = 0;

  /**
   * @param ttlSeconds how long a JWT is valid.
   * @param now the clock, in milliseconds since the epoch.
   */
  constructor(
    private readonly ttlSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** A fresh JWT. */
  issue(): string {
    const iat = Math.floor(this.now() / 1000);
    const payload = Buffer.from(
      JSON.stringify({ iss: "nexrl-serve", sub: "tinker-client", iat, exp: iat + this.ttlSeconds, jti: randomUUID() }),
    ).toString("base64url");
    this.issued++;
    return `${HEADER}.${payload}.${this.sign(`${HEADER}.${payload}`)}`;
  }

  /** Whether `token` is a JWT this server issued, and whether it is still valid. */
  verify(token: string | undefined): JwtCheck {
    const [header, payload, signature, ...rest] = (token ?? "").split(".");
    if (!header || !payload || !signature || rest.length > 0) return "invalid";
    const expected = Buffer.from(this.sign(`${header}.${payload}`));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return "invalid";
    try {
      const { exp } = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { exp?: unknown };
      return typeof exp === "number" && exp * 1000 > this.now() ? "valid" : "expired";
    } catch {
      return "invalid";
    }
  }

  private sign(data: string): string {
    return createHmac("sha256", this.key).update(data).digest("base64url");
  }
}
