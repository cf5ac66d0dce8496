/**
 * One keep-alive connection pool per origin, shared by every transport talking to it and closed
 * when the last one lets go.
 *
 * @module
 */
import { Pool } from "undici";

interface Entry {
  pool: Pool;
  users: number;
}

const pools = new Map<string, Entry>();

/** How long to wait for a TCP connection before giving up, in milliseconds. */
const CONNECT_TIMEOUT_MS = 10_000;

/** A pool lent to one user; `release()` gives it back (once). */
export interface PoolLease {
  /** The shared pool of the origin. */
  readonly pool: Pool;
  /** Gives the pool back; the last user's release closes it. */
  release(): Promise<void>;
}

/** Borrows the keep-alive pool of `origin` (`http://host:port`), creating it on first use. */
export function acquirePool(origin: string): PoolLease {
  let entry = pools.get(origin);
  if (!entry) {
    entry = { pool: new Pool(origin, { connectTimeout: CONNECT_TIMEOUT_MS, keepAliveTimeout: 4_000 }), users: 0 };
    pools.set(origin, entry);
  }
  entry.users++;
  const lent = entry;
  let released = false;
  return {
    pool: lent.pool,
    async release() {
      if (released) return;
      released = true;
      if (--lent.users > 0) return;
      if (pools.get(origin) === lent) pools.delete(origin);
      await lent.pool.close();
    },
  };
}
