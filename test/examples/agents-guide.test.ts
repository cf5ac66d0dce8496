/**
 * The agents guide's own example runs as written (issue 25, item 9): its files (the code blocks
 * with a `title`) are written to a folder, and its command line runs the built CLI there
 * (`npm run build` first): the run trains its two steps and exits 0.
 */
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { root, runNexrl, tempDir } from "../support/runs.js";

/** The fenced blocks of a Markdown text with a `title="…"`, by title. */
function titledBlocks(markdown: string): Map<string, string> {
  const blocks = new Map<string, string>();
  for (const match of markdown.matchAll(/^```\w+ title="([^"]+)"\n([\s\S]*?)^```$/gm)) blocks.set(match[1]!, match[2]!);
  return blocks;
}

describe("docs/guides/agents.md", () => {
  it("its first example (agent, evaluator, recipe, data, command) trains on the local backend and exits 0", async () => {
    const guide = await readFile(join(root, "docs/guides/agents.md"), "utf8");
    const files = titledBlocks(guide);
    expect([...files.keys()]).toEqual(["agent.ts", "evaluator.ts", "recipe.yaml", "train.jsonl"]);
    const command = /^```sh\nnpx nexrl (.+)\n```$/m.exec(guide)?.[1];
    expect(command).toBe("-m training-service -c recipe.yaml --run-nexrl");
    const dir = await tempDir("nexrl-agents-guide-");
    for (const [name, text] of files) await writeFile(join(dir, name), text);
    // A project with nexrl and openai installed, as the guide's reader has.
    await mkdir(join(dir, "node_modules"));
    await symlink(root, join(dir, "node_modules", "nexrl"), "dir");
    await symlink(join(root, "node_modules", "openai"), join(dir, "node_modules", "openai"), "dir");
    const run = await runNexrl([...command!.split(" "), "-o", "run"], { cwd: dir });
    expect([run.code, run.stderr]).toEqual([0, ""]);
    expect(run.stdout).toMatch(/run summary: completed after step 2 of 2/);
    const rows = (await readFile(join(dir, "run", "metrics.jsonl"), "utf8"))
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number>);
    expect(rows.map((row) => [row["agent/episodes"], row["agent/trajectories"], row["agent/prefix_breaks"]])).toEqual([
      [4, 4, 0],
      [4, 4, 0],
    ]);
    expect(rows.map((row) => row["train/skipped"])).toEqual([0, 0]);
  });
});
