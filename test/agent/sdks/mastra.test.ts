/**
 * An agent written with Mastra (examples/agents/mastra.ts) trains unchanged through the gateway:
 * an `Agent` with a `createTool` tool and an OpenAI-compatible model at the gateway, which Mastra
 * calls with chat completions. `@mastra/core` 1 needs Node >= 22.13: this runs in the Node 24 pass.
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

describe.skipIf(!nodeAtLeast(22, 13))("a Mastra agent (@mastra/core 1 needs Node >= 22.13)", () => {
  it("trains with one trajectory per episode and 0 prefix breaks, and runs its tool loop against the gateway", async () => {
    const trained = await trainExample("mastra.yaml");
    expectTrained(trained, "at least one");
    expect(await endpointsCalled(trained)).toEqual(["chat.completions"]);
    const policy = scriptedInference([LOOKUP_CALL, "7"]);
    const run = await episode(await exampleAgent("mastra.ts"), policy);
    expectToolLoop(run, policy);
    expect(run.result).toEqual({ final_answer: "7" });
  });
});
