/**
 * Keep-alive connections per origin: one undici `Pool` per origin and connection limit, shared by
 * every transport that uses it and closed when the last one lets go.
 *
 * @module
 */
import { Pool } from "undici";

/** How long to wait for a TCP connection before giving up, in milliseconds. */
const CONNECT_TIMEOUT_MS = 10_000;
/** How long an idle connection is kept open when the server does not say, in milliseconds. */
const KEEP_ALIVE_MS = 4_000;

/** An undici pool shared by the transports to one origin, and what they learned about it. */
export interface SharedPool {
  /** At most `connections` keep-alive connections; requests beyond them wait for a free one. */
  readonly pool: Pool;
  /**
   * Whether the origin has answered a request through this pool: until then a connection refused
   * on a loopback address or a host name that does not resolve points at a wrong URL rather than
   * at a restart, and transports give up on it quickly.
   */
  reached: boolean;
}

/** A shared pool lent to one transport; `release()` gives it back (once). */
export interface PoolLease {
  /** The shared pool. */
  readonly shared: SharedPool;
  /** Gives the pool back; the last user's release closes it. */
  release(): Promise<void>;
}

const pools = new Map<string, { shared: SharedPool; users: number }>();

/** Borrows the pool of `origin` (`http://host:port`) with at most `connections` connections, creating it on first use. */
export function acquirePool(origin: string, connections: number): PoolLease {
  const key = `${origin} ${connections}`;
  let entry = pools.get(key);
  if (!entry) {
    const pool = new Pool(origin, {
      connections,
      connect: { timeout: CONNECT_TIMEOUT_MS },
      keepAliveTimeout: KEEP_ALIVE_MS,
      // The transport times each attempt as a whole; undici's own timers (300 s) would cut
      // long calls short of the transport's timeout.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    entry = { shared: { pool, reached: false }, users: 0 };
    pools.set(key, entry);
  }
  entry.users++;
  const lent = entry;
  let released = false;
  return {
    shared: lent.shared,
    async release() {
      if (released) return;
      released = true;
      if (--lent.users > 0) return;
      if (pools.get(key) === lent) pools.delete(key);
      await lent.shared.pool.close();
    },
  };
}
