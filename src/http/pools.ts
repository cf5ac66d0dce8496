/**
 * Keep-alive connections per origin: one {@link ConnectionPool} per origin and connection limit,
 * shared by every transport that uses it and closed when the last one lets go.
 *
 * @module
 */
import { Client, errors } from "undici";

/** How long to wait for a TCP connection before giving up, in milliseconds. */
const CONNECT_TIMEOUT_MS = 10_000;
/** How long an idle connection is kept open when the server does not say, in milliseconds. */
const KEEP_ALIVE_MS = 4_000;

/** What the pool needs of an exchange (an `Exchange` of `exchange.ts`): to start it on a connection, or fail it. */
export interface PooledExchange {
  /** Sends the request on `client`; false when the exchange was given up on while it waited (`client` stays free). */
  start(client: Client): boolean;
  /** Fails the exchange with `error`. */
  fail(error: Error): void;
}

/**
 * At most `limit` keep-alive connections to one origin, each an undici `Client` carrying one
 * exchange at a time. Free connections wait on a stack (the most recently used goes first, so
 * the others can time out when fewer are needed); exchanges beyond the limit wait in arrival order.
 * (undici's `Pool` does the same, but looks through all its connections for a free one on every
 * request: at a thousand connections that was a tenth of the transport's CPU time.)
 */
export class ConnectionPool {
  /** Whether {@link ConnectionPool.close} was called. */
  closed = false;
  private readonly idle: Client[] = [];
  private readonly all: Client[] = [];
  private readonly waiting: PooledExchange[] = [];

  /**
   * @param origin `http://host:port` the connections go to.
   * @param limit most connections open at once.
   */
  constructor(
    private readonly origin: string,
    private readonly limit: number,
  ) {}

  /** Starts `exchange` on a free connection, or queues it until one is given back. */
  send(exchange: PooledExchange): void {
    if (this.closed) return exchange.fail(new errors.ClientDestroyedError());
    const client = this.idle.pop() ?? (this.all.length < this.limit ? this.open() : undefined);
    if (client) exchange.start(client);
    else this.waiting.push(exchange);
  }

  /** Takes back the connection of an exchange that ended: for the next waiting exchange, else onto the idle stack. */
  giveBack(client: Client): void {
    if (this.closed) return;
    // Waiting exchanges given up on (timed out, aborted) are skipped.
    for (let next = this.waiting.shift(); next; next = this.waiting.shift()) {
      if (next.start(client)) return;
    }
    this.idle.push(client);
  }

  /** Closes every connection once its exchange has ended; exchanges still waiting fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const exchange of this.waiting.splice(0)) exchange.fail(new errors.ClientDestroyedError());
    this.idle.length = 0;
    await Promise.all(this.all.splice(0).map((client) => client.close()));
  }

  private open(): Client {
    const client = new Client(this.origin, {
      connect: { timeout: CONNECT_TIMEOUT_MS },
      keepAliveTimeout: KEEP_ALIVE_MS,
      // The transport times each attempt as a whole; undici's own timers (300 s) would cut
      // long calls short of the transport's timeout.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    this.all.push(client);
    return client;
  }
}

/** A connection pool shared by the transports to one origin, and what they learned about it. */
export interface SharedPool {
  /** At most `connections` keep-alive connections; requests beyond them wait for a free one. */
  readonly pool: ConnectionPool;
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
    entry = { shared: { pool: new ConnectionPool(origin, connections), reached: false }, users: 0 };
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
