/**
 * Token history turn by turn, for every family nexrl renders (the Jinja templates of Qwen3,
 * DeepSeek V3 and Gemma 3, the Llama 3 and Harmony renderers), over the real tokenizers: the
 * prompt of turn k + the tokens sampled for it must be continued by the next prompt as the gateway
 * builds it (renderChat splices the sampled tokens), so the episode merges into one trajectory
 * with 0 prefix breaks; and that history equals the full rendering of the conversation, or differs
 * only where the template rewrites history (Qwen3 drops earlier thinking, Harmony earlier
 * analysis, DeepSeek V3's template omits the end of a single tool call), which the splice hides.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { mergeCalls, type GatewayCall } from "../../src/agent/index.js";
import { renderChat, type AnsweredMessage } from "../../src/agent/render.js";
import type { HfTokenizer } from "../../src/inference/index.js";
import type { ChatMessage, ChatTemplateOptions, ToolCall, ToolDefinition } from "../../src/wire/tokenizer.js";
import { lenmlHfTokenizer, type LenmlModel } from "../support/lenml.js";

const WEATHER: ToolDefinition = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

/** One assistant turn: what the model sampled (as text, its end token included) and the message the agent sends back. */
interface Turn {
  sampled: string;
  reply: ChatMessage;
}

/** An episode: the messages before each assistant turn, and the turns. */
interface Episode {
  model: LenmlModel;
  /** How the template differs from the spliced history, when it does (null: it does not). */
  rewrites: string | null;
  tools: boolean;
  /** chat_template_kwargs of every call. */
  kwargs?: Record<string, unknown>;
  /** Messages the agent adds before turn k (the first entry opens the conversation). */
  before: ChatMessage[][];
  turns: Turn[];
}

const paris = (args: string): ToolCall => ({
  id: "call_1",
  type: "function",
  function: { name: "get_weather", arguments: args },
});
const tool = (content: string): ChatMessage => ({ role: "tool", content, tool_call_id: "call_1" });
const user = (content: string): ChatMessage => ({ role: "user", content });

const EPISODES: Record<string, Episode> = {
  "qwen3, a tool call with thinking then the answer": {
    model: "qwen3",
    rewrites: null,
    tools: true,
    before: [
      [{ role: "system", content: "You are a weather bot." }, user("Weather in Paris?")],
      [tool('{"temp": 21}')],
    ],
    turns: [
      {
        sampled:
          '<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        reply: {
          role: "assistant",
          content: "<think>\nNeed the weather.\n</think>\n\n",
          tool_calls: [paris('{"city": "Paris"}')],
        },
      },
      {
        sampled: "<think>\nIt is 21.\n</think>\n\nIt is 21 °C.<|im_end|>",
        reply: { role: "assistant", content: "<think>\nIt is 21.\n</think>\n\nIt is 21 °C." },
      },
    ],
  },
  "qwen3, a second user turn": {
    model: "qwen3",
    rewrites: "the template drops the thinking of turns before the last user message",
    tools: false,
    before: [[user("2 + 2?")], [user("And 3 + 3?")]],
    turns: [
      {
        sampled: "<think>\nEasy.\n</think>\n\n4<|im_end|>",
        reply: { role: "assistant", content: "<think>\nEasy.\n</think>\n\n4" },
      },
      {
        sampled: "<think>\nAlso easy.\n</think>\n\n6<|im_end|>",
        reply: { role: "assistant", content: "<think>\nAlso easy.\n</think>\n\n6" },
      },
    ],
  },
  "qwen3 with enable_thinking false, a tool call then a second user turn": {
    model: "qwen3",
    rewrites: "the template writes no empty <think></think> block in front of earlier answers",
    tools: true,
    kwargs: { enable_thinking: false },
    before: [[user("Weather in Paris?")], [tool('{"temp": 21}')], [user("Thanks!")]],
    turns: [
      {
        sampled: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        reply: { role: "assistant", content: "", tool_calls: [paris('{"city": "Paris"}')] },
      },
      { sampled: "It is 21 °C.<|im_end|>", reply: { role: "assistant", content: "It is 21 °C." } },
      { sampled: "You are welcome.<|im_end|>", reply: { role: "assistant", content: "You are welcome." } },
    ],
  },
  "deepseek_v3, a tool call then the answer": {
    model: "deepseek_v3",
    rewrites: "the template writes no <｜tool▁calls▁end｜><｜end▁of▁sentence｜> after a single tool call",
    tools: true,
    before: [
      [{ role: "system", content: "You are a weather bot." }, user("Weather in Paris?")],
      [tool('{"temp": 21}')],
    ],
    turns: [
      {
        sampled:
          '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
        reply: { role: "assistant", content: "", tool_calls: [paris('{"city": "Paris"}')] },
      },
      { sampled: "It is 21 °C.<｜end▁of▁sentence｜>", reply: { role: "assistant", content: "It is 21 °C." } },
    ],
  },
  "gemma3, two user turns": {
    model: "gemma3",
    rewrites: null,
    tools: false,
    before: [[{ role: "system", content: "Be brief." }, user("Hi")], [user("Bye")]],
    turns: [
      { sampled: "Hello!<end_of_turn>", reply: { role: "assistant", content: "Hello!" } },
      { sampled: "Goodbye.<end_of_turn>", reply: { role: "assistant", content: "Goodbye." } },
    ],
  },
  "llama3, a JSON tool call then the answer": {
    model: "llama3_1",
    rewrites: null,
    tools: true,
    before: [
      [{ role: "system", content: "You are a weather bot." }, user("Weather in Paris?")],
      [tool('{"temp": 21}')],
    ],
    turns: [
      {
        sampled: '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>',
        reply: { role: "assistant", content: "", tool_calls: [paris('{"city": "Paris"}')] },
      },
      { sampled: "It is 21 °C.<|eot_id|>", reply: { role: "assistant", content: "It is 21 °C." } },
    ],
  },
  "llama3, a <|python_tag|> call ended by <|eom_id|>": {
    model: "llama3_1",
    rewrites:
      "the template writes a JSON call as JSON ended by <|eot_id|>; the model wrote <|python_tag|> and <|eom_id|>",
    tools: true,
    before: [[user("Weather in Paris?")], [tool('{"temp": 21}')]],
    turns: [
      {
        sampled: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>',
        reply: { role: "assistant", content: "", tool_calls: [paris('{"city": "Paris"}')] },
      },
      { sampled: "It is 21 °C.<|eot_id|>", reply: { role: "assistant", content: "It is 21 °C." } },
    ],
  },
  "gpt_oss, analysis and a tool call then analysis and the final answer": {
    model: "gpt_oss",
    rewrites: null,
    tools: true,
    before: [[{ role: "system", content: "Be brief." }, user("Weather in Paris?")], [tool('{"temp": 21}')]],
    turns: [
      {
        sampled:
          '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
        reply: {
          role: "assistant",
          content: "",
          reasoning_content: "Need the weather.",
          tool_calls: [paris('{"city":"Paris"}')],
        },
      },
      {
        sampled:
          "<|channel|>analysis<|message|>21 degrees.<|end|><|start|>assistant<|channel|>final<|message|>It is 21 °C.<|return|>",
        reply: { role: "assistant", content: "It is 21 °C.", reasoning_content: "21 degrees." },
      },
    ],
  },
  "gpt_oss, a second user turn": {
    model: "gpt_oss",
    rewrites:
      "Harmony drops the analysis of turns that ended in a final answer, and history ends them with <|end|>, not <|return|>",
    tools: false,
    before: [[user("2 + 2?")], [user("And 3 + 3?")]],
    turns: [
      {
        sampled: "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
        reply: { role: "assistant", content: "4", reasoning_content: "Easy." },
      },
      {
        sampled:
          "<|channel|>analysis<|message|>Also easy.<|end|><|start|>assistant<|channel|>final<|message|>6<|return|>",
        reply: { role: "assistant", content: "6", reasoning_content: "Also easy." },
      },
    ],
  },
};

const tokenizers = new Map<LenmlModel, HfTokenizer>();
beforeAll(async () => {
  for (const model of new Set(Object.values(EPISODES).map((e) => e.model)))
    tokenizers.set(model, await lenmlHfTokenizer(model));
}, 120_000);

function call(turn: number, promptTokens: number[], completionTokens: number[]): GatewayCall {
  return {
    turn,
    endpoint: "chat.completions",
    promptTokens,
    completionTokens,
    logprobs: completionTokens.map(() => -0.5),
    finishReason: "stop",
    text: "",
    toolCalls: [],
    reply: { content: "", toolCalls: [] },
    startedAt: 0,
    durationMs: 1,
  };
}

/** Plays the episode as the gateway records it: each prompt built by renderChat from the conversation so far. */
function play(tok: HfTokenizer, episode: Episode) {
  const base: ChatTemplateOptions = {
    ...(episode.tools && { tools: [WEATHER] }),
    ...(episode.kwargs && { chatTemplateKwargs: episode.kwargs }),
  };
  const options: ChatTemplateOptions = { ...base, addGenerationPrompt: true };
  const messages: ChatMessage[] = [];
  const answered: AnsweredMessage[] = [];
  const calls: GatewayCall[] = [];
  episode.turns.forEach((turn, k) => {
    messages.push(...episode.before[k]!);
    const prompt = renderChat(tok, messages, answered, options);
    const sampled = tok.encode(turn.sampled);
    calls.push(call(k + 1, prompt, sampled));
    messages.push(turn.reply);
    answered.push({
      content: turn.reply.content,
      toolCalls: turn.reply.tool_calls ?? [],
      generated: tok.decode(sampled),
      tokens: sampled,
    });
  });
  const last = calls.at(-1)!;
  const full = tok.applyChatTemplate(messages, base);
  return { calls, history: [...last.promptTokens, ...last.completionTokens], full };
}

describe("turn-by-turn token history of every family", () => {
  for (const [name, episode] of Object.entries(EPISODES)) {
    it(`${name}: one trajectory, 0 prefix breaks; ${episode.rewrites === null ? "equals the full rendering" : "differs from the full rendering: " + episode.rewrites}`, () => {
      const tok = tokenizers.get(episode.model)!;
      expect(tok.renderer).toBe(
        episode.model === "llama3_1" ? "llama3" : episode.model === "gpt_oss" ? "gpt_oss" : undefined,
      );
      const { calls, history, full } = play(tok, episode);
      // Each prompt continues the previous prompt and its sampled tokens exactly.
      for (let k = 1; k < calls.length; k++) {
        const before = [...calls[k - 1]!.promptTokens, ...calls[k - 1]!.completionTokens];
        expect(calls[k]!.promptTokens.slice(0, before.length)).toEqual(before);
        expect(calls[k]!.promptTokens.length).toBeGreaterThan(before.length);
      }
      const merged = mergeCalls(calls, tok);
      expect(merged.breaks).toEqual([]);
      expect(merged.sequences).toHaveLength(1);
      expect(merged.sequences[0]!.tokens).toEqual(history);
      expect(merged.sequences[0]!.lossMask.filter((m) => m === 1)).toHaveLength(
        calls.reduce((n, c) => n + c.completionTokens.length, 0),
      );
      if (episode.rewrites === null) {
        // The template may close the last turn with a newline after its end token.
        expect(full.slice(0, history.length)).toEqual(history);
        expect(tok.decode(full.slice(history.length)).trim()).toBe("");
        expect(full.length - history.length).toBeLessThanOrEqual(1);
      } else {
        expect(full.slice(0, history.length)).not.toEqual(history);
      }
    });
  }
});
