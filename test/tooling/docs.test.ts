/**
 * The documentation reads well as files: the guides are plain Markdown (TypeDoc links their code
 * spans to the API, scripts/typedoc-categories.js), and no `@throws` list repeats itself.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

/** Every .ts file under `dir`. */
async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(join(root, dir), { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith(".ts")).map((e) => join(e.parentPath, e.name));
}

/** The error classes a `@throws` tag's text names more than once. */
function repeatedErrors(tag: string): string[] {
  const names: string[] = tag.match(/\b[A-Z]\w*Error\b/g) ?? [];
  return [...new Set(names.filter((name, i) => names.indexOf(name) !== i))];
}

describe("the docs", () => {
  it("keep TypeDoc's {@link} markup out of the guides, which are read as Markdown too", async () => {
    const guides = (await readdir(join(root, "docs/guides"))).filter((f) => f.endsWith(".md"));
    expect(guides.length).toBeGreaterThan(5);
    const marked: string[] = [];
    for (const guide of guides) {
      const text = await readFile(join(root, "docs/guides", guide), "utf8");
      for (const match of text.matchAll(/\{@link[^}]*\}/g)) marked.push(`${guide}: ${match[0]}`);
    }
    expect(marked).toEqual([]);
  });

  it("name each error once per @throws tag", async () => {
    expect(repeatedErrors("`RolloutError`, `RunError`, `UserCodeError`, `RunError`")).toEqual(["RunError"]);
    const repeated: string[] = [];
    for (const file of await sources("src")) {
      const text = await readFile(file, "utf8");
      // A tag runs to the next tag or the end of its comment.
      for (const match of text.matchAll(/@throws([\s\S]*?)(?=@\w|\*\/)/g)) {
        const names = repeatedErrors(match[1]!);
        if (names.length > 0) repeated.push(`${file.slice(root.length + 1)}: ${names.join(", ")}`);
      }
    }
    expect(repeated).toEqual([]);
  });
});
