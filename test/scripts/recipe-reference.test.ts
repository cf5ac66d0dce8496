import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");

describe("the recipe reference (docs/guides/recipe-reference.md)", () => {
  it("is what the recipe schema gives today", async () => {
    const tsx = path.join(root, "node_modules", ".bin", "tsx");
    const checked = await run(tsx, ["scripts/recipe-reference.ts", "--check"], { cwd: root }).then(
      () => 0,
      (error: { code: number; stderr: string }) => error,
    );
    expect(checked, "run npm run docs:recipes").toBe(0);
  });

  it("lists keys with their types, defaults and the schema's descriptions", async () => {
    const page = await readFile(path.join(root, "docs", "guides", "recipe-reference.md"), "utf8");
    expect(page).toContain(
      "| `data.batch_size` | integer | `32` | Tasks per dataloader batch (before `rollout_repeat_n`). |",
    );
    expect(page).toMatch(/^\| `service\.train_service\.backend` \| `local`, `tinker`, `weaver` \|/m);
    expect(page).toMatch(/^\| \*\*`rollout_worker`\*\* \| section \|/m);
  });
});
