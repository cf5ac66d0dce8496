/**
 * An agent written with the OpenAI Agents SDK (examples/agents/openai-agents.ts) trains unchanged
 * through the gateway with the SDK's defaults (the Responses API) and a function tool; its
 * answers cut at the token limit (the SDK throws on an `incomplete` response) are truncated episodes.
 * `@openai/agents` uses `openai` 7, which needs Node >= 22: this runs in the Node 24 pass.
 */
import { describe, expect, it } from "vitest";
import {
  endpointsCalled,
  episode,
  exampleAgent,
  expectToolLoop,
  expectTrained,
  LOOKUP_CALL,
  nodeAtLeast,
  scriptedInference,
  trainExample,
} from "./helpers.js";

describe.skipIf(!nodeAtLeast(22))(
  "an agent written with the OpenAI Agents SDK (@openai/agents uses openai 7, which needs Node >= 22)",
  () => {
    it("trains with one trajectory per episode and 0 prefix breaks through /v1/responses, and runs its tool loop against the gateway", async () => {
      // The untrained model's answers mostly run to the token limit: truncated episodes, scored as they are.
      const result = await trainExample("openai-agents.yaml", ["rollout_worker.agent.truncated_reward=null"]);
      expectTrained(result, "at least one");
      expect(result.metrics.reduce((n, row) => n + row["agent/truncated_episodes"]!, 0)).toBeGreaterThan(0);
      expect(await endpointsCalled(result)).toEqual(["responses"]);
      const policy = scriptedInference([LOOKUP_CALL, "7"]);
      const run = await episode(await exampleAgent("openai-agents.ts"), policy);
      expectToolLoop(run, policy);
      expect(run.result).toEqual({ final_answer: "7" });
    });
  },
);
