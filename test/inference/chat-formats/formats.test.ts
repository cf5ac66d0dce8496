import { describe, expect, it } from "vitest";
import {
  chatFormat,
  chatParserFor,
  type ChatFamily,
  type ParsedReply,
} from "../../../src/inference/chat-formats/index.js";
import type { ToolCall, ToolDefinition } from "../../../src/wire/tokenizer.js";

/** Ids call_1, call_2, … in order. */
function ids(): () => string {
  let n = 0;
  return () => `call_${++n}`;
}

const call = (id: string, name: string, args: unknown): ToolCall => ({
  id,
  type: "function",
  function: { name, arguments: JSON.stringify(args) },
});

function parse(family: ChatFamily, text: string, tools?: ToolDefinition[]): ParsedReply {
  return chatFormat(family).parse(text, { newId: ids(), ...(tools && { tools }) });
}

const NESTED = { q: "π ≈ 3.14 — “ok” 😀", opts: { deep: [1, { x: null }], flag: true } };

describe("hermes (qwen25)", () => {
  it("parses one and several calls, with content before and after, nested JSON and unicode", () => {
    expect(
      parse("hermes", 'Let me look.\n<tool_call>\n{"name": "get", "arguments": {"city": "Zürich"}}\n</tool_call>'),
    ).toEqual({
      content: "Let me look.",
      toolCalls: [call("call_1", "get", { city: "Zürich" })],
      malformed: 0,
    });
    const two = `<tool_call>${JSON.stringify({ name: "a", arguments: NESTED })}</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call> done`;
    expect(parse("hermes", two)).toEqual({
      content: "done",
      toolCalls: [
        call("call_1", "a", NESTED),
        { id: "call_2", type: "function", function: { name: "b", arguments: '{"x": 1}' } },
      ],
      malformed: 0,
    });
  });

  it("reads an argument holding </tool_call> in a string to the closing tag after it", () => {
    const text = '<tool_call>{"name": "echo", "arguments": {"s": "a</tool_call>b"}}</tool_call>';
    expect(parse("hermes", text)).toEqual({
      content: "",
      toolCalls: [call("call_1", "echo", { s: "a</tool_call>b" })],
      malformed: 0,
    });
  });

  it("leaves malformed calls in the text and counts them: bad JSON, wrong structure, unclosed", () => {
    for (const text of [
      "<tool_call>{not json}</tool_call>",
      '<tool_call>{"name": 3}</tool_call>',
      '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
      '<tool_call>{"name": "f", "arguments": {}}',
    ])
      expect(parse("hermes", text)).toEqual({ content: text, toolCalls: [], malformed: 1 });
    const mixed = 'a <tool_call>oops</tool_call> <tool_call>{"name": "f"}</tool_call>';
    expect(parse("hermes", mixed)).toEqual({
      content: "a <tool_call>oops</tool_call>",
      toolCalls: [call("call_1", "f", {})],
      malformed: 1,
    });
  });

  it("writes calls back as blocks its parser reads", () => {
    const calls = [call("x", "get", { city: "Zürich" }), call("y", "b", NESTED)];
    const text = chatFormat("hermes").write("Sure.", calls);
    expect(text).toBe(
      `Sure.\n<tool_call>{"name":"get","arguments":{"city":"Zürich"}}</tool_call>\n<tool_call>${JSON.stringify({ name: "b", arguments: NESTED })}</tool_call>`,
    );
    expect(parse("hermes", text).toolCalls.map((c) => c.function)).toEqual(calls.map((c) => c.function));
    expect(chatFormat("hermes").write("ok", [], "thinking")).toBe("<think>\nthinking\n</think>\n\nok");
  });
});

describe("qwen3_coder", () => {
  const TOOLS: ToolDefinition[] = [
    {
      type: "function",
      function: {
        name: "search",
        parameters: {
          type: "object",
          properties: {
            query: { type: "string" },
            limit: { type: "integer" },
            exact: { type: "boolean" },
            filters: { type: "object" },
            tags: { type: "array" },
            score: { type: ["number", "null"] },
          },
        },
      },
    },
  ];
  const XML =
    "<tool_call>\n<function=search>\n<parameter=query>\nwho is 42?\n</parameter>\n<parameter=limit>\n5\n</parameter>\n" +
    '<parameter=exact>\ntrue\n</parameter>\n<parameter=filters>\n{"lang": "日本語"}\n</parameter>\n<parameter=tags>\n["a", 2]\n</parameter>\n' +
    "<parameter=score>\n0.5\n</parameter>\n</function>\n</tool_call>";

  it("types the values with the tool's JSON schema, and keeps strings without one", () => {
    expect(parse("qwen3_coder", `I will search.\n${XML}`, TOOLS)).toEqual({
      content: "I will search.",
      toolCalls: [
        call("call_1", "search", {
          query: "who is 42?",
          limit: 5,
          exact: true,
          filters: { lang: "日本語" },
          tags: ["a", 2],
          score: 0.5,
        }),
      ],
      malformed: 0,
    });
    expect(parse("qwen3_coder", XML).toolCalls[0]!.function.arguments).toBe(
      JSON.stringify({
        query: "who is 42?",
        limit: "5",
        exact: "true",
        filters: '{"lang": "日本語"}',
        tags: '["a", 2]',
        score: "0.5",
      }),
    );
  });

  it("parses several calls, multi-line values and a value holding </tool_call>", () => {
    const text =
      "<tool_call>\n<function=write>\n<parameter=code>\nline 1\n  line 2\n</parameter>\n</function>\n</tool_call>\n" +
      "<tool_call>\n<function=echo>\n<parameter=s>\nsee </tool_call> here\n</parameter>\n</function>\n</tool_call>\nafter";
    expect(parse("qwen3_coder", text)).toEqual({
      content: "after",
      toolCalls: [
        call("call_1", "write", { code: "line 1\n  line 2" }),
        call("call_2", "echo", { s: "see </tool_call> here" }),
      ],
      malformed: 0,
    });
  });

  it("leaves malformed calls in the text and counts them", () => {
    for (const text of [
      "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</tool_call>", // no </function>
      "<tool_call>\n<function=f>\nstray text\n</function>\n</tool_call>", // not a parameter
      "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>", // unclosed
    ])
      expect(parse("qwen3_coder", text)).toEqual({ content: text, toolCalls: [], malformed: 1 });
    // A value that is not of its schema type.
    const bad = "<tool_call>\n<function=search>\n<parameter=limit>\nmany\n</parameter>\n</function>\n</tool_call>";
    expect(parse("qwen3_coder", bad, TOOLS)).toEqual({ content: bad, toolCalls: [], malformed: 1 });
  });

  it("writes calls back as Qwen3-Coder's template does", () => {
    const text = chatFormat("qwen3_coder").write("", [call("x", "search", { query: "q", limit: 5 })]);
    expect(text).toBe(
      "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>",
    );
    expect(parse("qwen3_coder", text, TOOLS).toolCalls[0]!.function.arguments).toBe('{"query":"q","limit":5}');
  });
});

describe("llama3", () => {
  it("parses a call with and without <|python_tag|>, several separated by ;", () => {
    expect(parse("llama3", '{"name": "get", "parameters": {"city": "Paris"}}')).toEqual({
      content: "",
      toolCalls: [call("call_1", "get", { city: "Paris" })],
      malformed: 0,
    });
    expect(
      parse(
        "llama3",
        `Checking.<|python_tag|>{"type": "function", "name": "a", "parameters": ${JSON.stringify(NESTED)}}; {"name": "b", "arguments": {}}`,
      ),
    ).toEqual({
      content: "Checking.",
      toolCalls: [call("call_1", "a", NESTED), call("call_2", "b", {})],
      malformed: 0,
    });
    const braces = '{"name": "echo", "parameters": {"s": "}; {\\"name\\": \\"x\\"}"}}';
    expect(parse("llama3", braces).toolCalls).toEqual([call("call_1", "echo", { s: '}; {"name": "x"}' })]);
  });

  it("keeps text and JSON answers that are not calls as content", () => {
    expect(parse("llama3", "The answer is 4.")).toEqual({ content: "The answer is 4.", toolCalls: [], malformed: 0 });
    expect(parse("llama3", '{"answer": 4}')).toEqual({ content: '{"answer": 4}', toolCalls: [], malformed: 0 });
  });

  it("counts malformed calls: bad JSON, wrong structure, unclosed, built-in tool syntax", () => {
    for (const text of [
      '<|python_tag|>{"name": "f", "parameters": {oops}}',
      '{"name": "f", "parameters": [1]}',
      '{"name": "f", "parameters": {"x": 1}',
      '<|python_tag|>brave_search.call(query="x")',
    ])
      expect(parse("llama3", text)).toEqual({ content: text, toolCalls: [], malformed: 1 });
  });

  it("writes calls back as JSON, after <|python_tag|> when the message has text", () => {
    const calls = [call("x", "a", { n: 1 }), call("y", "b", {})];
    expect(chatFormat("llama3").write("", calls)).toBe(
      '{"name":"a","parameters":{"n":1}}; {"name":"b","parameters":{}}',
    );
    const text = chatFormat("llama3").write("Let me see.", calls);
    expect(text).toBe('Let me see.<|python_tag|>{"name":"a","parameters":{"n":1}}; {"name":"b","parameters":{}}');
    expect(parse("llama3", text).toolCalls.map((c) => c.function)).toEqual(calls.map((c) => c.function));
  });
});

describe("deepseek_v3 and deepseek_v31", () => {
  const v3 = (name: string, args: string) =>
    `<｜tool▁call▁begin｜>function<｜tool▁sep｜>${name}\n\`\`\`json\n${args}\n\`\`\`<｜tool▁call▁end｜>`;
  const v31 = (name: string, args: string) => `<｜tool▁call▁begin｜>${name}<｜tool▁sep｜>${args}<｜tool▁call▁end｜>`;
  const section = (...calls: string[]) => `<｜tool▁calls▁begin｜>${calls.join("\n")}<｜tool▁calls▁end｜>`;

  it("parses V3's typed calls with JSON code blocks, one and several, after content", () => {
    expect(parse("deepseek_v3", `Sure.${section(v3("get", '{"city": "北京"}'))}`)).toEqual({
      content: "Sure.",
      toolCalls: [call("call_1", "get", { city: "北京" })],
      malformed: 0,
    });
    expect(parse("deepseek_v3", section(v3("a", JSON.stringify(NESTED)), v3("b", "{}"))).toolCalls).toEqual([
      call("call_1", "a", NESTED),
      call("call_2", "b", {}),
    ]);
  });

  it("parses V3.1's name-separator-JSON calls", () => {
    expect(parse("deepseek_v31", `ok${section(v31("a", '{"x": "```"}'), v31("b", "{}"))}`)).toEqual({
      content: "ok",
      toolCalls: [call("call_1", "a", { x: "```" }), call("call_2", "b", {})],
      malformed: 0,
    });
  });

  it("counts malformed calls and keeps them as text; an unclosed section is malformed as a whole", () => {
    const bad = section(v3("a", "{oops}"), v3("b", '{"k": 1}'));
    expect(parse("deepseek_v3", bad)).toEqual({
      content: v3("a", "{oops}"),
      toolCalls: [call("call_1", "b", { k: 1 })],
      malformed: 1,
    });
    const unclosed = `<｜tool▁calls▁begin｜>${v31("a", "{}")}`;
    expect(parse("deepseek_v31", unclosed)).toEqual({ content: unclosed, toolCalls: [], malformed: 1 });
    const v3InV31 = section(v3("a", "{}"));
    expect(parse("deepseek_v31", v3InV31)).toEqual({ content: v3InV31, toolCalls: [], malformed: 1 });
  });

  it("writes calls back as DeepSeek's templates do", () => {
    const calls = [call("x", "a", { n: 1 }), call("y", "b", {})];
    const v3Text = chatFormat("deepseek_v3").write("Hi", calls);
    expect(v3Text).toBe(`Hi${section(v3("a", '{"n":1}'), v3("b", "{}"))}`);
    expect(parse("deepseek_v3", v3Text).toolCalls).toEqual([call("call_1", "a", { n: 1 }), call("call_2", "b", {})]);
    expect(chatFormat("deepseek_v31").write("", calls)).toBe(section(v31("a", '{"n":1}'), v31("b", "{}")));
  });
});

describe("gpt_oss (Harmony)", () => {
  const analysis = "<|channel|>analysis<|message|>User wants weather. Call the tool.<|end|>";
  const callMessage = (name: string, args: string) =>
    `<|start|>assistant<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`;

  it("reads the analysis channel as reasoning, commentary to=functions.NAME as calls, final as content", () => {
    expect(parse("gpt_oss", analysis + callMessage("get_weather", '{"location": "Tokyo 東京"}'))).toEqual({
      content: "",
      toolCalls: [call("call_1", "get_weather", { location: "Tokyo 東京" })],
      reasoning: "User wants weather. Call the tool.",
      malformed: 0,
    });
    expect(parse("gpt_oss", `${analysis}<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>`)).toEqual({
      content: "It is sunny.",
      toolCalls: [],
      reasoning: "User wants weather. Call the tool.",
      malformed: 0,
    });
    // The recipient before the channel, and two calls.
    const two = `<|start|>assistant to=functions.a<|channel|>commentary json<|message|>${JSON.stringify(NESTED)}<|call|>${callMessage("b", "{}")}`;
    expect(parse("gpt_oss", two).toolCalls).toEqual([call("call_1", "a", NESTED), call("call_2", "b", {})]);
  });

  it("reads text without Harmony markers as content, and a final message cut by the length limit", () => {
    expect(parse("gpt_oss", "plain")).toEqual({ content: "plain", toolCalls: [], malformed: 0 });
    expect(parse("gpt_oss", "<|channel|>final<|message|>partial ans").content).toBe("partial ans");
  });

  it("counts malformed calls: bad JSON, a recipient that is not a function, a header without message", () => {
    const badJson = callMessage("f", "{oops");
    expect(parse("gpt_oss", badJson)).toEqual({ content: badJson, toolCalls: [], malformed: 1 });
    const builtin = "<|channel|>commentary to=browser.search <|constrain|>json<|message|>{}<|call|>";
    expect(parse("gpt_oss", builtin).malformed).toBe(1);
    expect(parse("gpt_oss", "<|channel|>final<|message|>a<|end|><|start|>assistant<|channel|>final").malformed).toBe(1);
  });

  it("writes a reply back as Harmony messages its parser reads", () => {
    const calls = [call("x", "get", { q: 1 })];
    const text = chatFormat("gpt_oss").write("", calls, "think first");
    expect(text).toBe(
      '<|channel|>analysis<|message|>think first<|end|><|start|>assistant<|channel|>commentary to=functions.get <|constrain|>json<|message|>{"q":1}<|call|>',
    );
    expect(parse("gpt_oss", text)).toEqual({
      content: "",
      toolCalls: [call("call_1", "get", { q: 1 })],
      reasoning: "think first",
      malformed: 0,
    });
  });
});

describe("mistral", () => {
  it("parses the JSON list and the [TOOL_CALLS]NAME[ARGS] forms", () => {
    expect(
      parse(
        "mistral",
        `Sure.[TOOL_CALLS][{"name": "a", "arguments": ${JSON.stringify(NESTED)}}, {"name": "b", "arguments": {}}]`,
      ),
    ).toEqual({
      content: "Sure.",
      toolCalls: [call("call_1", "a", NESTED), call("call_2", "b", {})],
      malformed: 0,
    });
    expect(parse("mistral", '[TOOL_CALLS]get[ARGS]{"city": "Paris"}[TOOL_CALLS]now[CALL_ID]abc123456[ARGS]{}')).toEqual(
      {
        content: "",
        toolCalls: [call("call_1", "get", { city: "Paris" }), call("abc123456", "now", {})],
        malformed: 0,
      },
    );
  });

  it("counts malformed calls", () => {
    for (const text of [
      '[TOOL_CALLS][{"name": "a", "arguments": {oops}}]',
      '[TOOL_CALLS][{"name": "a"',
      "[TOOL_CALLS]get[ARGS]oops",
      '[TOOL_CALLS][{"arguments": {}}]',
    ])
      expect(parse("mistral", text)).toEqual({ content: text, toolCalls: [], malformed: 1 });
  });

  it("writes calls back as the JSON list", () => {
    const text = chatFormat("mistral").write("ok", [call("x", "a", { n: 1 })]);
    expect(text).toBe('ok[TOOL_CALLS][{"name":"a","arguments":{"n":1}}]');
    expect(parse("mistral", text).toolCalls).toEqual([call("call_1", "a", { n: 1 })]);
  });
});

describe("kimi_k2", () => {
  const kimi = (id: string, args: string) =>
    `<|tool_call_begin|>${id}<|tool_call_argument_begin|>${args}<|tool_call_end|>`;
  const section = (...calls: string[]) => `<|tool_calls_section_begin|>${calls.join("")}<|tool_calls_section_end|>`;

  it("parses calls with the model's ids", () => {
    expect(
      parse(
        "kimi_k2",
        `Let me check.${section(kimi("functions.get_weather:0", '{"city": "Beijing 北京"}'), kimi("functions.b:1", JSON.stringify(NESTED)))}`,
      ),
    ).toEqual({
      content: "Let me check.",
      toolCalls: [
        call("functions.get_weather:0", "get_weather", { city: "Beijing 北京" }),
        call("functions.b:1", "b", NESTED),
      ],
      malformed: 0,
    });
  });

  it("counts malformed calls; an unclosed section is malformed as a whole", () => {
    expect(parse("kimi_k2", section(kimi("functions.a:0", "{bad"), kimi("functions.b:1", "{}")))).toEqual({
      content: kimi("functions.a:0", "{bad"),
      toolCalls: [call("functions.b:1", "b", {})],
      malformed: 1,
    });
    const unclosed = `<|tool_calls_section_begin|>${kimi("functions.a:0", "{}")}`;
    expect(parse("kimi_k2", unclosed)).toEqual({ content: unclosed, toolCalls: [], malformed: 1 });
  });

  it("writes calls back with Kimi ids", () => {
    const text = chatFormat("kimi_k2").write("", [call("call_x", "a", { n: 1 }), call("functions.b:7", "b", {})]);
    expect(text).toBe(section(kimi("functions.a:0", '{"n":1}'), kimi("functions.b:7", "{}")));
  });
});

describe("reasoning parsers", () => {
  const opts = { newId: ids(), parseTools: true };

  it("think_tag splits <think>…</think>, the </think>-only form and unclosed thinking off the content, then parses calls", () => {
    const parser = chatParserFor({ toolParser: "qwen25" });
    expect(
      parser.parse(
        '<think>\nI should call f.\n</think>\n\n<tool_call>{"name": "f", "arguments": {}}</tool_call>',
        opts,
      ),
    ).toEqual({
      content: "",
      toolCalls: [call("call_1", "f", {})],
      reasoning: "I should call f.",
      malformed: 0,
    });
    expect(parser.parse("opened in the prompt</think>\n\nAnswer: 4", opts)).toEqual({
      content: "Answer: 4",
      toolCalls: [],
      reasoning: "opened in the prompt",
      malformed: 0,
    });
    expect(parser.parse("<think>cut short", opts)).toEqual({
      content: "",
      toolCalls: [],
      reasoning: "cut short",
      malformed: 0,
    });
    expect(parser.parse("<think>\n\n</think>\n\nHi", opts)).toEqual({ content: "Hi", toolCalls: [], malformed: 0 });
    expect(parser.parse("no thinking", opts)).toEqual({ content: "no thinking", toolCalls: [], malformed: 0 });
  });

  it("deepseek-r1 reads text without </think> as reasoning; none leaves the tags in the content", () => {
    expect(
      chatParserFor({ toolParser: "deepseekv3", reasoningParser: "deepseek-r1" }).parse("still thinking", opts),
    ).toEqual({
      content: "",
      toolCalls: [],
      reasoning: "still thinking",
      malformed: 0,
    });
    const none = chatParserFor({ toolParser: "qwen3_coder", reasoningParser: "none" });
    expect(none.parse("<think>x</think>y", opts)).toEqual({
      content: "<think>x</think>y",
      toolCalls: [],
      malformed: 0,
    });
    const harmonyNone = chatParserFor({ toolParser: "gpt-oss", reasoningParser: "none" });
    expect(
      harmonyNone.parse("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y", opts),
    ).toEqual({
      content: "y",
      toolCalls: [],
      malformed: 0,
    });
  });

  it("without tools asked for, calls stay in the text and nothing is counted malformed", () => {
    const parser = chatParserFor({ toolParser: "hermes" });
    const text = '<think>t</think><tool_call>{"name": "f"}</tool_call> <tool_call>bad</tool_call>';
    expect(parser.parse(text, { ...opts, parseTools: false })).toEqual({
      content: '<tool_call>{"name": "f"}</tool_call> <tool_call>bad</tool_call>',
      toolCalls: [],
      reasoning: "t",
      malformed: 0,
    });
  });

  it("refuses unknown names and reasoning parsers that cannot read the format, naming the valid ones", () => {
    expect(() => chatParserFor({ toolParser: "llama4" })).toThrow(
      "unknown tool parser `llama4`; use one of qwen25, hermes, qwen3_coder, llama3, deepseekv3, deepseekv31, gpt-oss, mistral, kimi_k2",
    );
    expect(() => chatParserFor({ reasoningParser: "r1" })).toThrow(
      "unknown reasoning parser `r1`; use one of think_tag, qwen3, deepseek-r1, gpt-oss, none",
    );
    expect(() => chatParserFor({ toolParser: "gpt-oss", reasoningParser: "think_tag" })).toThrow(
      "use gpt-oss (or none)",
    );
    expect(() => chatParserFor({ reasoningParser: "gpt-oss" })).toThrow("the hermes format has none");
    // Family ids work as well as SGLang's names.
    expect(chatParserFor({ toolParser: "deepseek_v31" }).format.family).toBe("deepseek_v31");
  });
});
