import { UnexpectedResponseError } from "../../errors.js";
/**
 * {@link JwtCredential}: the JWT a Tinker server hands out for the API key when its
 * `client/config` sets `pjwt_auth_enabled`, as the SDK's `JwtAuthProvider` keeps it: traded at
 * `/api/v1/auth/token` before the first call, refreshed in the background five minutes before it
 * expires, and on demand when a call finds it within a minute of expiry (a late background
 * refresh cannot leak a stale token; the server answers a stale one with 401).
 *
 * @module
 */

/** The background refresh runs this long before expiry. */
const REFRESH_BEFORE_EXPIRY_MS = 300_000;
/** A call refreshes first when the token has at most this long left. */
const REFRESH_ON_DEMAND_MS = 60_000;
/** Wait after a failed background refresh. */
const RETRY_DELAY_MS = 60_000;

/** When `jwt` expires (its `exp` claim, milliseconds since the epoch), or undefined when it cannot be read. */
export function jwtExpiry(jwt: string): number | undefined {
  try {
    const payload = JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")) as {
      exp?: unknown;
    };
    return typeof payload.exp === "number" && Number.isFinite(payload.exp) ? payload.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Options of {@link JwtCredential}. */
export interface JwtCredentialOptions {
  /** Trades the API key for a fresh JWT (`POST /api/v1/auth/token`). */
  exchange: () => Promise<string>;
  /** The clock, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
  /** Receives a line when an on-demand refresh fails and the old token is used. */
  log?: ((line: string) => void) | undefined;
}

/** A JWT traded for the API key, kept fresh. */
export class JwtCredential {
  private jwt = "";
  private refreshing: Promise<string> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Exchanges made so far. */
  exchanges = 0;

  /** @param options how to exchange, the clock and the log. */
  constructor(private readonly options: JwtCredentialOptions) {}

  /** Trades the key for the first JWT and starts the background refresh (which never keeps the process alive). */
  async start(): Promise<void> {
    await this.refresh();
  }

  /** The JWT to send now, refreshed first when it is within a minute of expiry. */
  async token(): Promise<string> {
    if (this.jwt !== "" && this.msLeft() > REFRESH_ON_DEMAND_MS) return this.jwt;
    try {
      return await this.refresh();
    } catch (error) {
      if (this.jwt === "") throw error;
      this.options.log?.(
        `nexrl tinker: refreshing the JWT failed (${(error as Error).message}); using the current one`,
      );
      return this.jwt;
    }
  }

  /** Stops the background refresh. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private msLeft(): number {
    const expiry = jwtExpiry(this.jwt);
    return expiry === undefined ? 0 : expiry - (this.options.now ?? Date.now)();
  }

  /** One exchange at a time: calls that need a fresh token while one is being fetched share it. */
  private refresh(): Promise<string> {
    this.refreshing ??= this.options
      .exchange()
      .then((jwt) => {
        if (typeof jwt !== "string" || jwt === "")
          throw new UnexpectedResponseError("the Tinker server answered /api/v1/auth/token without a jwt");
        this.exchanges++;
        this.jwt = jwt;
        this.schedule(this.nextRefreshMs());
        return jwt;
      })
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /**
   * When the background refresh runs: five minutes before expiry; half way for a token that lives
   * less than ten minutes, and at least a second later, so a short-lived token is not fetched in
   * a tight loop; a minute later when the expiry cannot be read.
   */
  private nextRefreshMs(): number {
    if (jwtExpiry(this.jwt) === undefined) return RETRY_DELAY_MS;
    const left = this.msLeft();
    return Math.max(1000, left - REFRESH_BEFORE_EXPIRY_MS, left / 2);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.refresh().catch(() => this.schedule(RETRY_DELAY_MS));
    }, delayMs);
    this.timer.unref();
  }
}
