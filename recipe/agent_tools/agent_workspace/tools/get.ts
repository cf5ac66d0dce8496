/**
 * The `get` tool: the secret code of an animal (from `data/codes.json`). The model cannot know
 * the codes; it has to call this tool to answer `code fox?`.
 */
import { readFileSync } from "node:fs";

const codes = JSON.parse(readFileSync(new URL("../../data/codes.json", import.meta.url), "utf8")) as Record<
  string,
  string
>;

/** The code of animal `k`, or a message saying there is none. */
export function get(args: { k?: unknown }): string {
  const key = String(args.k ?? "")
    .trim()
    .toLowerCase();
  return Object.hasOwn(codes, key) ? codes[key]! : `no code for "${key}"`;
}
