/**
 * Keep-alive connections per origin, shared by every transport talking to it and closed when the
 * last one lets go.
 *
 * @module
 */
import { Client, type Dispatcher } from "undici";

/** How long to wait for a TCP connection before giving up, in milliseconds. */
const CONNECT_TIMEOUT_MS = 10_000;
/** How long an idle connection is kept open when the server does not say, in milliseconds. */
const KEEP_ALIVE_MS = 4_000;

/**
 * Where a request gets its connection, and where it gives it back once undici is done with the
 * request (its answer ended or failed).
 */
export interface Connections {
  /** A dispatcher free to take one request now. */
  take(): Dispatcher;
  /** Gives back what `take` returned, once its request is over. */
  give(connection: Dispatcher): void;
}

/**
 * One undici `Client` (one keep-alive connection) per request in flight, the connection freed
 * last reused first, so that a burst's extra connections go idle and time out.
 *
 * Why not undici's `Pool`: it finds a free connection by scanning all of them, twice per request,
 * and without a connection limit it opens a new one whenever every connection is busy at the
 * second scan. At 1024 rollouts in flight on a loopback server that cost 18–24 µs per request
 * (a quarter of the whole request) and 1.7 connections per request in flight.
 */
export class ConnectionPool implements Connections {
  /**
   * Whether the origin has answered a request through this pool: until then a connection refused
   * on a loopback address or a host name that does not resolve points at a wrong URL rather than
   * at a restart, and transports give up on it quickly.
   */
  reached = false;
  private readonly idle: Client[] = [];
  private readonly clients: Client[] = [];
  private closing = false;

  /** @param origin `http://host:port` of every connection. */
  constructor(readonly origin: string) {}

  /** The connection freed last, else a new one. */
  take(): Client {
    if (this.closing) throw new Error(`the connections to ${this.origin} were closed`);
    const client = this.idle.pop();
    if (client) return client;
    const opened = new Client(this.origin, { connectTimeout: CONNECT_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_MS });
    this.clients.push(opened);
    return opened;
  }

  /** Takes back a connection whose request is over (a connection closed meanwhile is dropped). */
  give(connection: Dispatcher): void {
    const client = connection as Client;
    if (!this.closing && !client.closed && !client.destroyed) {
      this.idle.push(client);
      return;
    }
    const index = this.clients.indexOf(client);
    if (index >= 0) this.clients.splice(index, 1);
  }

  /** Connections open now, idle or busy. */
  get size(): number {
    return this.clients.length;
  }

  /** Closes every connection once its request in flight, if any, is over. */
  async close(): Promise<void> {
    this.closing = true;
    this.idle.length = 0;
    await Promise.all(this.clients.splice(0).map((client) => client.close()));
  }
}

interface Entry {
  pool: ConnectionPool;
  users: number;
}

const pools = new Map<string, Entry>();

/** A pool lent to one user; `release()` gives it back (once). */
export interface PoolLease {
  /** The shared pool of the origin. */
  readonly pool: ConnectionPool;
  /** Gives the pool back; the last user's release closes it. */
  release(): Promise<void>;
}

/** Borrows the keep-alive pool of `origin` (`http://host:port`), creating it on first use. */
export function acquirePool(origin: string): PoolLease {
  let entry = pools.get(origin);
  if (!entry) {
    entry = { pool: new ConnectionPool(origin), users: 0 };
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
