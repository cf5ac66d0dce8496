/**
 * Ids handed out for operations — Tinker's request ids (polled with `retrieve_future`) and
 * Weaver's operation ids (polled with `GET /operations/{id}`) — and forgotten again: a Tinker
 * client that polls a forgotten id gets 410 and resubmits.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import type { InFlightOperations, Operation } from "./operations.js";

/** How many ids are remembered; older ones count as forgotten. */
const CAPACITY = 10_000;

/** Id → operation. */
export class OperationRegistry {
  private readonly byId = new Map<string, Operation>();

  /** @param inFlight where every registered operation is counted until it has run. */
  constructor(private readonly inFlight?: InFlightOperations) {}

  /** Hands out a new id for `op` (an operation resubmitted gets a new id for the same op). */
  register(op: Operation): string {
    const id = randomUUID();
    this.byId.set(id, op);
    this.inFlight?.add(op);
    if (this.byId.size > CAPACITY) this.byId.delete(this.byId.keys().next().value!);
    return id;
  }

  /** The operation of an id, or undefined when it is unknown or was forgotten. */
  get(id: string): Operation | undefined {
    return this.byId.get(id);
  }

  /** Forgets an id, as a server does when a promise expires. */
  forget(id: string): void {
    this.byId.delete(id);
  }
}
