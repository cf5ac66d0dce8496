/**
 * Fault injection for `nexrl serve`: a seeded share of requests is answered with a failure a
 * client has to survive (or report), so retry logic can be tested against the real server.
 *
 * @module
 */
import type { ServerResponse } from "node:http";
import { Rng } from "../engine/prng.js";
import { sendJson } from "./io.js";
import { ConfigError } from "../errors.js";

/**
 * Kinds of injected fault:
 * - `408`: request timeout (on a poll: "poll again");
 * - `410`: the server forgot the promise, so the client must resubmit the request;
 * - `429`: rate limited, with `retry-after` / `retry-after-ms` headers;
 * - `500`: internal server error;
 * - `error`: the operation fails without being applied (`{error, category}` / an operation in
 *   state `error`);
 * - `drop`: the connection is closed without an answer.
 */
export type FaultKind = "408" | "410" | "429" | "500" | "error" | "drop";

/** Share of requests (0–1) answered with each kind of fault. */
export type FaultRates = Partial<Record<FaultKind, number>>;

const KINDS: readonly FaultKind[] = ["408", "410", "429", "500", "error", "drop"];

/**
 * Parses `408:0.1,410:0.05,429:0.1,500:0.1,error:0.05,drop:0.05` into {@link FaultRates}.
 * @throws {@link "nexrl".ConfigError | ConfigError} for an unknown kind, a rate outside [0, 1], or rates summing over 1.
 */
export function parseFaults(spec: string): FaultRates {
  const rates: FaultRates = {};
  for (const part of spec
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const [kind, rate, extra] = part.split(":");
    if (!KINDS.includes(kind as FaultKind) || rate === undefined || extra !== undefined) {
      throw new ConfigError(
        `bad fault "${part}"; write KIND:RATE with KIND one of ${KINDS.join(", ")}, e.g. 429:0.1,drop:0.05`,
      );
    }
    rates[kind as FaultKind] = Number(rate);
  }
  return checkRates(rates);
}

function checkRates(rates: FaultRates): FaultRates {
  let total = 0;
  for (const [kind, rate] of Object.entries(rates)) {
    if (!KINDS.includes(kind as FaultKind))
      throw new ConfigError(`unknown fault kind "${kind}"; use one of ${KINDS.join(", ")}`);
    if (typeof rate !== "number" || !(rate >= 0 && rate <= 1))
      throw new ConfigError(`the rate of fault ${kind} must be a number in [0, 1], got ${String(rate)}`);
    total += rate;
  }
  if (total > 1) throw new ConfigError(`fault rates add up to ${total}; their sum must be at most 1`);
  return rates;
}

/** Draws faults with a seeded random stream. */
export class FaultInjector {
  private readonly rng: Rng;
  private readonly rates: FaultRates;

  /**
   * @param rates share of requests per fault kind.
   * @param seed seed of the random stream: the same seed and request order give the same faults.
   */
  constructor(rates: FaultRates, seed: number) {
    this.rates = checkRates(rates);
    this.rng = new Rng(seed);
  }

  /** True when any fault rate is above zero. */
  get enabled(): boolean {
    return Object.values(this.rates).some((r) => r > 0);
  }

  /** Draws the fault for one request among the kinds that apply to it, or undefined for none. */
  draw(applicable: readonly FaultKind[]): FaultKind | undefined {
    if (!this.enabled) return undefined;
    const u = this.rng.next();
    let edge = 0;
    for (const kind of KINDS) {
      if (!applicable.includes(kind)) continue;
      edge += this.rates[kind] ?? 0;
      if (u < edge) return kind;
    }
    return undefined;
  }
}

/** Answers a status or `drop` fault; `extraBody` is merged into 408/410/429/500 bodies. */
export function sendFault(
  res: ServerResponse,
  kind: Exclude<FaultKind, "error">,
  extraBody: Record<string, unknown> = {},
): void {
  const message = `fault injected by nexrl serve --faults (${kind})`;
  switch (kind) {
    case "drop":
      res.socket?.destroy();
      return;
    case "408":
      sendJson(res, 408, { error: "request_timeout", message, ...extraBody });
      return;
    case "410":
      sendJson(res, 410, { error: "promise_expired", message, ...extraBody });
      return;
    case "429":
      sendJson(
        res,
        429,
        { error: "rate_limited", message, retryable: true, ...extraBody },
        { "retry-after": "1", "retry-after-ms": "10" },
      );
      return;
    case "500":
      sendJson(res, 500, { error: "internal_error", message, retryable: true, ...extraBody });
      return;
  }
}
