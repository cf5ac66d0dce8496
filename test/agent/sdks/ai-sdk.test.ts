/**
 * Agents written with the Vercel AI SDK (examples/agents/ai-sdk-*.ts) train unchanged through the
 * gateway: `.chat(model)` with `streamText` over two turns, the default model (the Responses API),
 * and `generateText` with a tool.
 * `ai` 7 and `@ai-sdk/openai` 4 need Node >= 22: these run in the Node 24 pass (npm run test:node24).
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

describe.skipIf(!nodeAtLeast(22))("Vercel AI SDK agents (ai 7 needs Node >= 22)", () => {
  it("openai.chat(model) with streamText: each two-turn episode is one trajectory, 0 prefix breaks, trained", async () => {
    const result = await trainExample("ai-sdk-chat.yaml");
    expectTrained(result, 2);
    expect(await endpointsCalled(result)).toEqual(["chat.completions"]);
  });

  it("the provider's default model, createOpenAI({ baseURL })(model), calls /v1/responses: one trajectory per two-turn episode, trained", async () => {
    const result = await trainExample("ai-sdk-responses.yaml");
    expectTrained(result, 2);
    expect(await endpointsCalled(result)).toEqual(["responses"]);
  });

  it("a tool() with multi-step generateText: trains, and runs the tool loop against the gateway", async () => {
    const trained = await trainExample("ai-sdk-tool.yaml");
    expectTrained(trained, "at least one");
    expect(await endpointsCalled(trained)).toEqual(["chat.completions"]);
    const policy = scriptedInference([LOOKUP_CALL, "7"]);
    const run = await episode(await exampleAgent("ai-sdk-tool.ts"), policy);
    expectToolLoop(run, policy);
    expect(run.result).toEqual({ final_answer: "7", tool_calls: 1 });
  });
});
