/**
 * The failure of an episode in which no model call was recorded: the agent never reached the
 * gateway, or every call it sent there failed. There is nothing to train on, and the usual cause
 * is an agent whose SDK is not pointed at the rollout's base URL.
 * @module
 */
import { UserCodeError } from "../errors.js";
import type { RolloutTrace } from "./trace.js";

/** What to check, by where the agent runs. */
const CHECK = {
  module:
    "check that the agent passes context.baseURL (its AgentContext's base URL, ending in /v1) to its SDK's base-URL option unchanged (openai: new OpenAI({ baseURL }); AI SDK: createOpenAI({ baseURL }); LangChain: new ChatOpenAI({ configuration: { baseURL } })) and calls the model with context.model; docs/guides/agents.md shows each SDK",
  external:
    "check that the external agent sends its model calls to the base_url its claimed task gave (it ends in /v1), before it pushes the episode",
} as const;

/** Text of a thrown value, with the rollout's random id written as a placeholder (so that the failure reads the same in every rollout). */
function describe(error: unknown, rolloutId: string): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.replaceAll(rolloutId, "{rolloutId}");
}

/**
 * The error that fails an episode with no recorded model call: it says whether no request
 * reached the gateway or how many failed (and the first failure), what the agent threw if it
 * threw, and what to check.
 * @param trace what the gateway recorded of the rollout (no calls).
 * @param agent `module` for an agent module, `external` for an agent in another process.
 * @param thrown what the agent threw, if it threw.
 */
export function noRecordedCallError(
  trace: RolloutTrace,
  agent: "module" | "external",
  thrown?: { error: unknown },
): UserCodeError {
  const failed = trace.failedRequests;
  const what = failed
    ? `none of the ${failed.count} request(s) this episode sent to the agent gateway succeeded (the first: ${failed.first})`
    : "no model call of this episode reached the agent gateway";
  const threw = thrown && describe(thrown.error, trace.rolloutId);
  const how = threw
    ? failed && threw.includes(failed.first.replace(/^\d+ /, ""))
      ? ", and the agent then threw that error"
      : `, and the agent then threw ${threw}`
    : agent === "external"
      ? ", and the agent pushed the episode"
      : ", and the agent returned";
  return new UserCodeError(`${what}${how}: there is nothing to train on; ${CHECK[agent]}`, {
    code: "agent_result",
    ...(thrown && { cause: thrown.error }),
  });
}
