/**
 * Agents written with the Vercel AI SDK (examples/agents/ai-sdk-*.ts) train unchanged through the
 * gateway: `.chat(model)` with `streamText` over two turns, and `generateText` with a tool.
 * `ai` 7 and `@ai-sdk/openai` 4 need Node >= 22: these run in the Node 24 pass (npm run test:node24).
 */
import { describe, expect, it } from "vitest";
import {
  episode,
  exampleAgent,
  expectToolLoop,
  expectTrained,
  LOOKUP_CALL,
  nodeAtLeast,
  scriptedInference,
  trainExample,
} from "./helpers.js";

describe.skipIf(!nodeAtLeast(22))("Vercel AI SDK agents (ai 7 needs Node >= 22)", () => {
  it("openai.chat(model) with streamText: each two-turn episode is one trajectory, 0 prefix breaks, trained", async () => {
    expectTrained(await trainExample("ai-sdk-chat.yaml"), 2);
  });

  it("a tool() with multi-step generateText: trains, and runs the tool loop against the gateway", async () => {
    expectTrained(await trainExample("ai-sdk-tool.yaml"), "at least one");
    const policy = scriptedInference([LOOKUP_CALL, "7"]);
    const run = await episode(await exampleAgent("ai-sdk-tool.ts"), policy);
    expectToolLoop(run, policy);
    expect(run.result).toEqual({ final_answer: "7", tool_calls: 1 });
  });
});
