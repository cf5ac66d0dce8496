/** The table the examples' lookup tools read: what the policy can only learn by calling the tool. */
const TABLE: Record<string, string> = { a: "7", b: "12", fox: "vixen" };

/** The value of `key`, or `unknown`. */
export function lookUp(key: string): string {
  return TABLE[key] ?? "unknown";
}
