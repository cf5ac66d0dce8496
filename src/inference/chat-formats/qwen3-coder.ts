/**
 * The XML format of Qwen3-Coder and Qwen3.5 (SGLang's and vLLM's `qwen3_coder` parsers):
 * `<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n…</function>\n</tool_call>`.
 * Values are text; they are typed with the tool's JSON schema when the request gives it.
 * @module
 */
import type { ToolCall, ToolDefinition } from "../../wire/tokenizer.js";
import { isObject, joinParts, parseJson, type ChatFormat } from "./types.js";
import { thinkBlock } from "./reasoning.js";
import { parseBlocks } from "./blocks.js";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
const FUNCTION = /^\s*<function=([^>\n]+)>([\s\S]*)<\/function>\s*$/;
const PARAMETER = /<parameter=([^>\n]+)>([\s\S]*?)<\/parameter>/g;

/** The JSON schema type of parameter `name` of tool `tool`, if the request declares it. */
function schemaType(tool: ToolDefinition | undefined, name: string): unknown {
  const properties = tool?.function.parameters?.["properties"];
  const schema = isObject(properties) ? properties[name] : undefined;
  return isObject(schema) ? schema["type"] : undefined;
}

/**
 * A parameter's text as the value its schema type says (numbers, booleans, null, objects and
 * arrays from their JSON; strings as written); undefined when the text is not of that type.
 * Without a schema the text stays a string.
 */
function typedValue(text: string, type: unknown): unknown {
  const types = Array.isArray(type) ? type : [type];
  if (types.includes("string") || type === undefined) return text;
  const value = parseJson(text);
  const fits = types.some(
    (t) =>
      (t === "integer" && Number.isInteger(value)) ||
      (t === "number" && typeof value === "number") ||
      (t === "boolean" && typeof value === "boolean") ||
      (t === "null" && value === null) ||
      (t === "object" && isObject(value)) ||
      (t === "array" && Array.isArray(value)),
  );
  return fits ? value : undefined;
}

/** One value's text: the new lines the format writes around it removed. */
function valueText(raw: string): string {
  return raw.replace(/^\n/, "").replace(/\n$/, "");
}

/** The call a `<tool_call>` block's body holds, or undefined when it is not one `<function=…>` of parameters. */
function callOf(body: string, tools: readonly ToolDefinition[] | undefined): Omit<ToolCall, "id"> | undefined {
  const fn = FUNCTION.exec(body);
  if (!fn) return undefined;
  const name = fn[1]!.trim();
  const tool = tools?.find((t) => t.function.name === name);
  const args: Record<string, unknown> = {};
  let rest = fn[2]!;
  for (const [whole, key, raw] of fn[2]!.matchAll(PARAMETER)) {
    const value = typedValue(valueText(raw!), schemaType(tool, key!.trim()));
    if (value === undefined) return undefined;
    args[key!.trim()] = value;
    rest = rest.replace(whole, "");
  }
  // Anything but white space between the parameters is a structure this format does not have.
  if (name === "" || rest.trim() !== "") return undefined;
  return { type: "function", function: { name, arguments: JSON.stringify(args) } };
}

/** A value as its parameter's text: strings as they are, other values as JSON. */
function parameterText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** One call as the format's XML block. */
function block(call: ToolCall): string {
  const args = parseJson(call.function.arguments);
  const parameters = isObject(args)
    ? Object.entries(args).map(([key, value]) => `<parameter=${key}>\n${parameterText(value)}\n</parameter>\n`)
    : [];
  return `${OPEN}\n<function=${call.function.name}>\n${parameters.join("")}</function>\n${CLOSE}`;
}

/** The Qwen3-Coder / Qwen3.5 XML format. */
export const qwen3Coder: ChatFormat = {
  family: "qwen3_coder",
  parse: (text, { newId, tools }) => parseBlocks(text, OPEN, CLOSE, (body) => callOf(body, tools), newId),
  write: (content, toolCalls, reasoning) => thinkBlock(reasoning) + joinParts([content, ...toolCalls.map(block)]),
};
