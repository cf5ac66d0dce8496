/**
 * The errors of the agent service. Each says what was wrong and how to fix it.
 * @module
 */
import { NexrlError } from "../types/errors.js";

/**
 * An agent module, declarative agent configuration, tool definition or tool binding cannot be
 * used: missing file, missing export, wrong shape. Names the file and the key at fault.
 */
export class AgentSetupError extends NexrlError {}

/**
 * An episode cannot be scored: the agent returned no reward and no evaluator is configured, or an
 * evaluator returned something other than `{ reward }` with a finite number.
 */
export class AgentResultError extends NexrlError {}

/** The agent gateway cannot listen (the port is taken, the host cannot be bound). */
export class AgentGatewayError extends NexrlError {}
