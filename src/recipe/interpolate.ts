/**
 * OmegaConf-style interpolation, resolved after composition and overrides:
 *
 * - `${a.b.c}` — the value at an absolute key path (`${a.list[0]}` or `${a.list.0}` for items).
 *   A string that is exactly one interpolation keeps the referenced value's type (number, list…);
 *   inside a longer string the value is stringified (JSON for maps and lists).
 * - `${oc.env:VAR}` — an environment variable (a string); `${oc.env:VAR,default}` uses `default`
 *   (as a string, or null for `null`) when `VAR` is unset.
 * - `${oc.decode:${oc.env:VAR}}` — parses a string as YAML, e.g. to read a number from the environment.
 * - `\${…}` — a literal `${…}`.
 * @module
 */
import { parse as parseYaml } from "yaml";
import { didYouMean } from "./suggest.js";
import {
  childOf,
  formatKeyPath,
  isPlainMap,
  parseKeyPath,
  type KeySegment,
  type Origins,
  type PlainMap,
} from "./tree.js";
import { RecipeError, type RecipeIssue } from "../errors.js";

/** A piece of a string: literal text, or the inside of one `${…}`. */
type Part = { readonly text: string } | { readonly inner: string };

/** Internal: an interpolation failed; carries the issue to report. */
class Failure {
  /** @param issue what to report. */
  constructor(readonly issue: RecipeIssue) {}
}

/** Key paths that interpolation may reference. */
const REFERENCE = /^[A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\])*$/;
/** `resolver:args` */
const RESOLVER = /^([A-Za-z_][\w.]*):([\s\S]*)$/;

/**
 * Resolves every interpolation in `data` and returns a new tree.
 * @param origins where each key was set, for error messages.
 * @param file the recipe file, for error messages.
 * @throws {@link RecipeError} listing every unset variable, unknown reference, cycle or syntax error.
 */
export function interpolate(
  data: PlainMap,
  origins: Origins,
  env: Readonly<Record<string, string | undefined>>,
  file: string,
): PlainMap {
  const resolver = new Resolver(data, origins, env);
  const issues: RecipeIssue[] = [];
  const reported = new Set<Failure>();
  const walk = (node: unknown, path: KeySegment[]): unknown => {
    if (typeof node === "string") {
      try {
        return resolver.resolveString(node, path);
      } catch (error) {
        if (!(error instanceof Failure)) throw error;
        if (!reported.has(error)) issues.push(error.issue);
        reported.add(error);
        return undefined;
      }
    }
    if (Array.isArray(node)) return node.map((item, i) => walk(item, [...path, i]));
    if (isPlainMap(node))
      return Object.fromEntries(Object.entries(node).map(([key, child]) => [key, walk(child, [...path, key])]));
    return node;
  };
  const out = walk(data, []) as PlainMap;
  if (issues.length > 0) throw RecipeError.fromIssues(issues, { file });
  return out;
}

/** Resolution state: memoised leaves, failed leaves, and the chain being resolved. */
class Resolver {
  private readonly done = new Map<string, unknown>();
  private readonly failed = new Map<string, Failure>();
  private readonly stack: string[] = [];

  constructor(
    private readonly data: PlainMap,
    private readonly origins: Origins,
    private readonly env: Readonly<Record<string, string | undefined>>,
  ) {}

  /** Resolves a string found at `path` (memoised; detects cycles). */
  resolveString(text: string, path: readonly KeySegment[]): unknown {
    if (!text.includes("${")) return text;
    const key = formatKeyPath(path);
    if (this.done.has(key)) return this.done.get(key);
    const failure = this.failed.get(key);
    if (failure) throw failure;
    if (this.stack.includes(key)) {
      const cycle = [...this.stack.slice(this.stack.indexOf(key)), key].join(" → ");
      throw this.fail(`interpolation cycle: ${cycle}`, this.stack[this.stack.indexOf(key)]!);
    }
    this.stack.push(key);
    try {
      const value = this.evaluateTemplate(text);
      this.done.set(key, value);
      return value;
    } catch (error) {
      if (error instanceof Failure) this.failed.set(key, error);
      throw error;
    } finally {
      this.stack.pop();
    }
  }

  /** A failure reported at `keyPath` (default: the leaf being resolved). */
  private fail(message: string, keyPath = this.stack[this.stack.length - 1] ?? ""): Failure {
    return new Failure({ keyPath, message, definedIn: this.origins.get(keyPath) });
  }

  /** Deep-resolves a referenced node. */
  private resolveNode(node: unknown, path: readonly KeySegment[]): unknown {
    if (typeof node === "string") return this.resolveString(node, path);
    if (Array.isArray(node)) return node.map((item, i) => this.resolveNode(item, [...path, i]));
    if (isPlainMap(node))
      return Object.fromEntries(
        Object.entries(node).map(([key, child]) => [key, this.resolveNode(child, [...path, key])]),
      );
    return node;
  }

  /** Evaluates a string that may contain interpolations. */
  private evaluateTemplate(text: string): unknown {
    const parts = this.split(text);
    const only = parts[0];
    if (parts.length === 1 && only !== undefined && "inner" in only) return this.evaluate(only.inner);
    return parts.map((part) => ("text" in part ? part.text : stringify(this.evaluate(part.inner)))).join("");
  }

  /** Splits a string into literal text and `${…}` parts, honouring nesting and `\${` escapes. */
  private split(text: string): Part[] {
    const parts: Part[] = [];
    let literal = "";
    let i = 0;
    while (i < text.length) {
      if (text.startsWith("\\${", i)) {
        literal += "${";
        i += 3;
      } else if (text.startsWith("${", i)) {
        const end = closingBrace(text, i + 2);
        if (end < 0) throw this.fail(`unterminated interpolation in ${JSON.stringify(text)}; close it with \`}\``);
        if (literal !== "") parts.push({ text: literal });
        literal = "";
        parts.push({ inner: text.slice(i + 2, end) });
        i = end + 1;
      } else {
        literal += text[i];
        i += 1;
      }
    }
    if (literal !== "") parts.push({ text: literal });
    return parts;
  }

  /** Evaluates the inside of one `${…}`. */
  private evaluate(inner: string): unknown {
    const call = RESOLVER.exec(inner.trim());
    if (call) return this.call(call[1]!, splitArguments(call[2]!));
    const reference = inner.trim();
    if (!REFERENCE.test(reference)) {
      throw this.fail(
        `invalid interpolation \`\${${inner}}\`; write an absolute key path such as \`\${data.batch_size}\` or \`\${oc.env:VAR}\``,
      );
    }
    return this.lookup(reference);
  }

  /** Calls a resolver (`oc.env`, `oc.decode`). */
  private call(name: string, args: string[]): unknown {
    if (name === "oc.env") {
      const variable = stringify(this.evaluateTemplate(args[0] ?? "")).trim();
      const value = this.env[variable];
      if (value !== undefined) return value;
      if (args.length >= 2) {
        const fallback = unquote(args.slice(1).join(",").trim());
        return fallback === null ? null : stringify(this.evaluateTemplate(fallback));
      }
      throw this.fail(
        `environment variable ${variable} is not set; export it, or give a default with \`\${oc.env:${variable},default}\``,
      );
    }
    if (name === "oc.decode") {
      const value = this.evaluateTemplate(args.join(",").trim());
      if (typeof value !== "string") return value;
      try {
        return parseYaml(value) as unknown;
      } catch (error) {
        throw this.fail(
          `oc.decode cannot parse ${JSON.stringify(value)} as YAML: ${(error as Error).message.split("\n")[0]}`,
        );
      }
    }
    throw this.fail(`unknown resolver \`${name}\`; available: oc.env, oc.decode`);
  }

  /** The resolved value at an absolute key path. */
  private lookup(reference: string): unknown {
    const segments = parseKeyPath(reference);
    let node: unknown = this.data;
    for (const [depth, segment] of segments.entries()) {
      const child = childOf(node, segment);
      if (child === undefined) {
        const siblings = isPlainMap(node) ? Object.keys(node) : [];
        const close = typeof segment === "string" ? didYouMean(segment, siblings) : undefined;
        const hint =
          close === undefined ? "" : `; did you mean \`${formatKeyPath([...segments.slice(0, depth), close])}\`?`;
        throw this.fail(`\`\${${reference}}\` refers to \`${formatKeyPath(segments)}\`, which does not exist${hint}`);
      }
      node = child;
    }
    return this.resolveNode(node, segments);
  }
}

/** Index of the `}` closing a `${` whose content starts at `start`, or -1. */
function closingBrace(text: string, start: number): number {
  let depth = 1;
  for (let i = start; i < text.length; i++) {
    if (text.startsWith("${", i)) {
      depth += 1;
      i += 1;
    } else if (text[i] === "}") {
      depth -= 1;
      if (depth === 0) return i;
    }
  }
  return -1;
}

/** Splits resolver arguments at top-level commas (not inside `${…}` or quotes). */
function splitArguments(text: string): string[] {
  const args: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let current = "";
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote !== undefined) {
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (text.startsWith("${", i)) {
      depth += 1;
    } else if (ch === "}") {
      depth -= 1;
    } else if (ch === "," && depth === 0) {
      args.push(current);
      current = "";
      continue;
    }
    current += ch;
  }
  args.push(current);
  return args;
}

/** A default argument: `null` → null, `'x'`/`"x"` → x, anything else as written. */
function unquote(text: string): string | null {
  if (text === "null") return null;
  const quoted = /^(['"])([\s\S]*)\1$/.exec(text);
  return quoted ? quoted[2]! : text;
}

/** How an interpolated value appears inside a longer string. */
function stringify(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === null || typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}
