/**
 * Writes docs/guides/recipe-reference.md, the reference of every recipe key, from the recipe
 * schema itself: the key paths, types and defaults from the zod schema (as JSON Schema), and each
 * key's description from the TSDoc comment on it in src/recipe/schema/. So the reference cannot
 * drift from what nexrl accepts.
 *
 *   npm run docs:recipes            # rewrite the page (npm run docs does it first)
 *   npm run docs:recipes -- --check # exit 1 when the committed page is not what the schema gives
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { z } from "zod";
import { recipeSchema } from "../src/recipe/schema/recipe.js";
import { ROW_FORMATS } from "../src/workers/row-formats.js";
import { ROWS_CHECKED } from "../src/run/row-check.js";

const OUT = fileURLToPath(new URL("../docs/guides/recipe-reference.md", import.meta.url));
const SCHEMA_FILE = fileURLToPath(new URL("../src/recipe/schema/recipe.ts", import.meta.url));

/** The part of a JSON Schema node this page reads. */
interface JsonNode {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  properties?: Record<string, JsonNode>;
  items?: JsonNode;
  anyOf?: JsonNode[];
  additionalProperties?: JsonNode | boolean;
}

/** Key path → description, from the TSDoc comments of the properties of `RecipeConfig`. */
function descriptions(): Map<string, string> {
  const program = ts.createProgram([SCHEMA_FILE], {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(SCHEMA_FILE)!;
  const alias = source.statements.find(
    (s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === "RecipeConfig",
  );
  if (!alias) throw new Error(`${SCHEMA_FILE} has no RecipeConfig type`);
  const out = new Map<string, string>();
  const walk = (type: ts.Type, prefix: string, depth: number): void => {
    if (depth > 6) return;
    for (const property of checker.getPropertiesOfType(checker.getNonNullableType(type))) {
      const key = prefix === "" ? property.name : `${prefix}.${property.name}`;
      const doc = ts.displayPartsToString(property.getDocumentationComment(checker)).replace(/\s+/g, " ").trim();
      if (doc !== "") out.set(key, doc);
      const declaration = property.valueDeclaration ?? property.declarations?.[0];
      if (!declaration) continue;
      const propertyType = checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(property, declaration));
      if (propertyType.isClassOrInterface() || (propertyType.flags & ts.TypeFlags.Object) !== 0) {
        if (checker.isArrayType(propertyType) || propertyType.getCallSignatures().length > 0) continue;
        walk(propertyType, key, depth + 1);
      }
    }
  };
  walk(checker.getTypeFromTypeNode(alias.type), "", 0);
  return out;
}

/** The node without `null` alternatives (optional and nullable keys). */
function unwrap(node: JsonNode): JsonNode {
  const options = node.anyOf?.filter((n) => n.type !== "null");
  return options?.length === 1 ? { ...options[0]!, default: node.default ?? options[0]!.default } : node;
}

/** A short type: enum values, `list of …`, or the JSON type. */
function typeText(node: JsonNode): string {
  if (node.enum) return node.enum.map((v) => `\`${String(v)}\``).join(", ");
  if (node.const !== undefined) return `\`${String(node.const)}\``;
  if (node.anyOf) return node.anyOf.map((n) => typeText(n)).join(" or ");
  const type = Array.isArray(node.type) ? node.type.join(" or ") : (node.type ?? "any");
  if (type === "array" && node.items) return `list of ${typeText(node.items)}`;
  if (type === "object" && !node.properties) return "map";
  return type;
}

/** Markdown-safe cell text. */
const cell = (text: string): string => text.replace(/\|/g, "\\|");

function rows(node: JsonNode, prefix: string, docs: Map<string, string>, out: string[]): void {
  for (const [name, raw] of Object.entries(node.properties ?? {})) {
    const key = prefix === "" ? name : `${prefix}.${name}`;
    const child = unwrap(raw);
    const nested = child.type === "object" && child.properties !== undefined;
    const fallback = child.default === undefined ? "" : `\`${JSON.stringify(child.default)}\``;
    out.push(
      `| \`${key}\` | ${nested ? "section" : cell(typeText(child))} | ${cell(nested ? "" : fallback)} | ${cell(docs.get(key) ?? "")} |`,
    );
    if (nested) rows(child, key, docs, out);
  }
}

function page(): string {
  const schema = z.toJSONSchema(recipeSchema, { io: "input", unrepresentable: "any" }) as JsonNode;
  const docs = descriptions();
  const lines = [
    "---",
    "title: Recipe reference",
    "---",
    "",
    "# Recipe reference",
    "",
    "Every key a recipe may set, with its type, its default and what it does. Generated from the",
    "recipe schema by `npm run docs:recipes` (do not edit by hand). Keys are NexRL's snake_case;",
    "composition (`defaults:`), interpolation (`${…}`) and command-line overrides are described in",
    "the README's Recipes section. An unknown key is refused with a suggestion, and a key nexrl has",
    "no use for is accepted only with the values that ask for nothing.",
    "",
    "| key | type | default | meaning |",
    "|---|---|---|---|",
  ];
  for (const [name, raw] of Object.entries(schema.properties ?? {})) {
    const section = unwrap(raw);
    const nested = section.type === "object" && section.properties !== undefined;
    if (!nested) {
      const fallback = section.default === undefined ? "" : `\`${JSON.stringify(section.default)}\``;
      lines.push(`| \`${name}\` | ${cell(typeText(section))} | ${cell(fallback)} | ${cell(docs.get(name) ?? "")} |`);
      continue;
    }
    lines.push(`| **\`${name}\`** | section | | ${cell(docs.get(name) ?? "")} |`);
    rows(section, name, docs, lines);
  }
  lines.push(
    "",
    "## Row fields of the built-in workers",
    "",
    `What each built-in \`rollout_worker.type\` reads of a data row. \`nexrl validate\` and the run check the first ${ROWS_CHECKED} rows of \`data\` and \`validate.data\` against it.`,
    "",
    "| worker | fields | example |",
    "|---|---|---|",
    ...Object.entries(ROW_FORMATS).map(
      ([type, format]) => `| \`${type}\` | ${cell(format.fields)} | ${cell(`\`${format.example}\``)} |`,
    ),
  );
  return `${lines.join("\n")}\n`;
}

const text = page();
if (process.argv.includes("--check")) {
  let committed = "";
  try {
    committed = readFileSync(OUT, "utf8");
  } catch {
    // missing: reported below
  }
  if (committed !== text) {
    console.error("docs/guides/recipe-reference.md is not what the recipe schema gives: run npm run docs:recipes");
    process.exit(1);
  }
} else writeFileSync(OUT, text);
