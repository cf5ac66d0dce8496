/**
 * The memory budget of `nexrl serve`: the models and sampling sessions it holds may together
 * reserve at most so many bytes (each engine counted at the storage it allocates, the most it can
 * hold resident), and one more is refused with a 503 that says what holds the memory, rather than
 * the process running out of memory and dying.
 *
 * @module
 */
import { constrainedMemory } from "node:process";
import { totalmem } from "node:os";
import { ProtocolError } from "../errors.js";

/** Share of the machine's memory (or the container's limit) that the default budget gives models. */
const DEFAULT_SHARE = 0.75;

const MIB = 2 ** 20;

/** The default budget: 75 % of the memory this process may use (its cgroup limit when set, else the machine's). */
export function defaultMemoryBudgetBytes(): number {
  const limit = constrainedMemory();
  const total = totalmem();
  return Math.floor(DEFAULT_SHARE * (limit > 0 && limit < total ? limit : total));
}

/** Bytes as whole MB (2^20 bytes), as messages and logs show them. */
export function megabytes(bytes: number): string {
  return `${Math.round(bytes / MIB)} MB`;
}

/** The memory reserved by loaded models against a limit. */
export class MemoryBudget {
  private used = 0;

  /**
   * @param limitBytes the most that may be reserved; undefined: no limit.
   * @param hint what a client can do when refused (e.g. how sessions expire), ending the message.
   */
  constructor(
    readonly limitBytes: number | undefined,
    private readonly hint: string,
  ) {}

  /** Bytes reserved now. */
  get usedBytes(): number {
    return this.used;
  }

  /**
   * Reserves `bytes` for `what` (e.g. "a small model").
   * @throws {@link ProtocolError} 503 `memory_budget_exceeded` when that would go over the limit.
   */
  reserve(bytes: number, what: string): void {
    if (this.limitBytes !== undefined && this.used + bytes > this.limitBytes)
      throw new ProtocolError(
        `nexrl serve has no memory for ${what} (${megabytes(bytes)}): the models and sampling sessions loaded hold ${megabytes(this.used)} of its ${megabytes(this.limitBytes)} memory budget; ${this.hint}`,
        { status: 503, code: "memory_budget_exceeded" },
      );
    this.used += bytes;
  }

  /** Gives back `bytes` reserved before. */
  release(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }
}
