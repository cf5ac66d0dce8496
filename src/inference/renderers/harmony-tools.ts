/**
 * Function tools as the Harmony format declares them in the developer message: a TypeScript-like
 * `namespace functions { … }` (openai/harmony's docs/format.md, "Defining available tools").
 *
 * @module
 */
import type { ToolDefinition } from "../../wire/tokenizer.js";

type Schema = Record<string, unknown>;

const asSchema = (value: unknown): Schema =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Schema) : {};

function isEnum(schema: Schema): boolean {
  return Array.isArray(schema.enum) && schema.enum.length > 0;
}

/** `// default: …` text: a string default quoted unless the schema is an enum. */
function defaultText(schema: Schema): string {
  const value = schema.default;
  if (typeof value === "string") return isEnum(schema) ? value : `"${value}"`;
  return JSON.stringify(value);
}

function withNull(schema: Schema, type: string): string {
  return schema.nullable === true && !type.includes("null") ? `${type} | null` : type;
}

/** The union lines of a `oneOf`, each ` | type // comments`. */
function unionLines(
  variants: readonly unknown[],
  indent: string,
  skipFirstDescription: boolean,
  propertyDescription?: string,
): string[] {
  return variants.map((v, i) => {
    const variant = asSchema(v);
    let line = `${indent} | ${withNull(variant, typeOf(variant, `${indent}   `))}`;
    const comments: string[] = [];
    const description = typeof variant.description === "string" ? variant.description : undefined;
    if (description !== undefined && !(i === 0 && skipFirstDescription) && description !== propertyDescription)
      comments.push(description);
    if (variant.default !== undefined) comments.push(`default: ${defaultText(variant)}`);
    if (comments.length > 0) line += ` // ${comments.join(" ")}`;
    return line;
  });
}

function objectType(schema: Schema, indent: string): string {
  let out = typeof schema.description === "string" ? `${indent}// ${schema.description}\n` : "";
  out += "{\n";
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  for (const [key, value] of Object.entries(asSchema(schema.properties))) {
    const property = asSchema(value);
    const optional = required.has(key) ? "" : "?";
    const description = typeof property.description === "string" ? property.description : undefined;
    if (typeof property.title === "string") out += `${indent}// ${property.title}\n${indent}//\n`;
    if (Array.isArray(property.oneOf)) {
      const firstVariant = asSchema(property.oneOf[0]).description;
      const above = description !== undefined && description !== firstVariant;
      if (above) out += `${indent}// ${description}\n`;
      if (property.default !== undefined) out += `${indent}// default: ${defaultText(property)}\n`;
      out += `${indent}${key}${optional}:\n`;
      for (const line of unionLines(property.oneOf, indent, above, description)) out += line + "\n";
      out += `${indent},\n`;
      continue;
    }
    if (description !== undefined) out += `${indent}// ${description}\n`;
    if (Array.isArray(property.examples) && property.examples.length > 0) {
      out += `${indent}// Examples:\n`;
      for (const example of property.examples) if (typeof example === "string") out += `${indent}// - "${example}"\n`;
    }
    out += `${indent}${key}${optional}: ${withNull(property, typeOf(property, `${indent}    `))},`;
    if (property.default !== undefined) out += ` // default: ${defaultText(property)}`;
    out += "\n";
  }
  return out + `${indent}}`;
}

/** The TypeScript-like type of a JSON schema. */
function typeOf(schema: Schema, indent: string): string {
  if (Array.isArray(schema.oneOf)) return "\n" + unionLines(schema.oneOf, indent, false).join("\n");
  const type = schema.type;
  if (Array.isArray(type)) return type.map((t) => (t === "integer" ? "number" : String(t))).join(" | ");
  switch (type) {
    case "object":
      return objectType(schema, indent);
    case "string":
      return isEnum(schema)
        ? (schema.enum as unknown[])
            .filter((v) => typeof v === "string")
            .map((v) => `"${v}"`)
            .join(" | ")
        : "string";
    case "number":
    case "integer":
      return "number";
    case "boolean":
      return "boolean";
    case "array":
      return schema.items === undefined ? "Array<any>" : `${typeOf(asSchema(schema.items), indent)}[]`;
    default:
      return "any";
  }
}

/** The `# Tools` section of the developer message for `tools`. */
export function harmonyToolsSection(tools: readonly ToolDefinition[]): string {
  const lines = ["## functions\n", "namespace functions {\n"];
  for (const { function: fn } of tools) {
    for (const line of (fn.description ?? "").split("\n")) if (fn.description) lines.push(`// ${line}`);
    lines.push(
      fn.parameters === undefined
        ? `type ${fn.name} = () => any;\n`
        : `type ${fn.name} = (_: ${typeOf(fn.parameters, "")}) => any;\n`,
    );
  }
  lines.push("} // namespace functions");
  return "# Tools\n\n" + lines.join("\n");
}
