/**
 * Chat sampling stops where the model's turn ends: for Harmony (gpt-oss) at `<|call|>` (a tool
 * call) and `<|return|>`, for Llama 3 at `<|eom_id|>` too. Without it a gpt-oss model that calls a
 * tool samples on past `<|call|>` into text the agent never asked for.
 */
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import type { InferenceClient } from "../../src/inference/index.js";
import { lenmlHfTokenizer } from "../support/lenml.js";
import { gateway, recording } from "../support/agent.js";

/** A policy over `tokenizer` that answers "ok" and its EOS at once. */
function instant(tokenizer: InferenceClient["tokenizer"]): InferenceClient {
  return {
    tokenizer,
    async completion(prompt) {
      const responseTokens = [...tokenizer.encode("ok"), tokenizer.eosId];
      return {
        promptTokens: prompt as number[],
        responseTokens,
        response: "ok",
        logprobs: responseTokens.map(() => -0.1),
        finishReason: "stop",
      };
    },
    chat: () => Promise.reject(new Error("unused")),
  };
}

describe("turn-ending tokens", () => {
  it("the Harmony and Llama 3 renderers name their turn ends; a Jinja template needs none", async () => {
    const harmony = await lenmlHfTokenizer("gpt_oss");
    expect(harmony.renderer).toBe("gpt_oss");
    const harmonyEnds = harmony.turnEndIds?.map((id) => harmony.decode([id], { specialTokens: "keep" }));
    expect(harmonyEnds).toContain("<|call|>");
    expect(harmonyEnds).not.toContain(harmony.eosToken);
    const llama = await lenmlHfTokenizer("llama3_1");
    expect(llama.renderer).toBe("llama3");
    expect(llama.turnEndIds?.map((id) => llama.decode([id], { specialTokens: "keep" }))).toContain("<|eom_id|>");
    expect((await lenmlHfTokenizer("qwen3")).turnEndIds).toBeUndefined();
  });

  it("the gateway's chat calls stop at them; its plain completions do not", async () => {
    const tokenizer = await lenmlHfTokenizer("gpt_oss");
    const g = await gateway();
    const { client, calls } = recording(instant(tokenizer));
    const session = g.openRollout(client, { maxTokensPerCall: 16 });
    const openai = new OpenAI({ baseURL: session.baseURL, apiKey: "unused", maxRetries: 0 });
    await openai.chat.completions.create({ model: "policy", messages: [{ role: "user", content: "hi" }] });
    await openai.completions.create({ model: "policy", prompt: "hi" });
    expect(calls[0]!.options.stopTokenIds).toEqual(tokenizer.turnEndIds);
    expect(tokenizer.turnEndIds!.length).toBeGreaterThan(0);
    expect(calls[1]!.options.stopTokenIds).toBeUndefined();
    session.finish();
  });
});
