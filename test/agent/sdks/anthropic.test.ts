/**
 * An agent written with the Anthropic SDK (examples/agents/anthropic.ts) trains unchanged through
 * the gateway's Messages API: `messages.create` with a tool, its `tool_result` sent back.
 */
import { describe, expect, it } from "vitest";
import {
  endpointsCalled,
  episode,
  exampleAgent,
  expectToolLoop,
  expectTrained,
  LOOKUP_CALL,
  scriptedInference,
  trainExample,
} from "./helpers.js";

describe("an agent written with the Anthropic SDK", () => {
  it("trains with one trajectory per episode and 0 prefix breaks through /v1/messages, and runs its tool loop against the gateway", async () => {
    const result = await trainExample("anthropic.yaml");
    expectTrained(result, "at least one");
    expect(await endpointsCalled(result)).toEqual(["messages"]);
    const policy = scriptedInference([LOOKUP_CALL, "7"]);
    const run = await episode(await exampleAgent("anthropic.ts"), policy);
    expectToolLoop(run, policy);
    expect(run.result).toEqual({ final_answer: "7" });
  });
});
