/**
 * Agents written with LangChain.js and LangGraph.js (examples/agents/langchain.ts, langgraph.ts)
 * train unchanged through the gateway: `ChatOpenAI` over two turns, and a prebuilt ReAct agent
 * with a tool. `@langchain/openai` 1 needs Node >= 22: these run in the Node 24 pass.
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

describe.skipIf(!nodeAtLeast(22))("LangChain.js and LangGraph.js agents (@langchain/openai 1 needs Node >= 22)", () => {
  it("ChatOpenAI with configuration.baseURL: each two-turn episode is one trajectory, 0 prefix breaks, trained", async () => {
    const trained = await trainExample("langchain.yaml");
    expectTrained(trained, 2);
    expect(await endpointsCalled(trained)).toEqual(["chat.completions"]);
  });

  it("a LangGraph ReAct agent with a tool: trains, and runs the tool loop against the gateway", async () => {
    const trained = await trainExample("langgraph.yaml");
    expectTrained(trained, "at least one");
    expect(await endpointsCalled(trained)).toEqual(["chat.completions"]);
    const policy = scriptedInference([LOOKUP_CALL, "7"]);
    const run = await episode(await exampleAgent("langgraph.ts"), policy);
    expectToolLoop(run, policy);
    expect(run.result).toEqual({ final_answer: "7" });
  });
});
