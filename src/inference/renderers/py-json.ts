/**
 * JSON text as Python's `json.dumps` writes it (`ensure_ascii=False`), which is what the `tojson`
 * filter of `transformers`' chat templates produces and so what models saw in training: `", "`
 * and `": "` between items without indentation, `","` and `": "` with it.
 *
 * @module
 */

/**
 * `value` as `json.dumps(value, ensure_ascii=False, indent=indent)` writes it. Numbers are
 * JavaScript's (a float that is a whole number, `21.0` in Python, reads back as `21`).
 */
export function pythonJson(value: unknown, indent?: number): string {
  return write(value, indent, "");
}

function write(value: unknown, indent: number | undefined, at: string): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  const inner = indent === undefined ? "" : at + " ".repeat(indent);
  const open = indent === undefined ? "" : "\n" + inner;
  const close = indent === undefined ? "" : "\n" + at;
  const separator = indent === undefined ? ", " : ",\n" + inner;
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[${open}${value.map((v) => write(v, indent, inner)).join(separator)}${close}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return "{}";
  const items = entries.map(([k, v]) => `${JSON.stringify(k)}: ${write(v, indent, inner)}`);
  return `{${open}${items.join(separator)}${close}}`;
}
