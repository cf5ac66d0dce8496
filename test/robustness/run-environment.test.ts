/** Issue 13, item 13 (and the last of item 16): bad environments get a one-line cause and the right exit code; a refused recipe writes nothing. */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { access, chmod, mkdir, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCliChild, userProject, writeRecipe, writeWorker } from "../support/user-project.js";
import { unprivilegedUser } from "./unprivileged.js";

/** Whether this machine lets the tests make a folder immutable (root, and a file system with attributes). */
function chattrWorks(): boolean {
  const probe = mkdtempSync(join(tmpdir(), "nexrl-chattr-"));
  try {
    const made = spawnSync("chattr", ["+i", probe]).status === 0;
    if (made) spawnSync("chattr", ["-i", probe]);
    return made;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/** Runs as `nobody` when the tests run as root (root writes into read-only folders), if `nobody` can read the checkout. */
const asUnprivileged = unprivilegedUser();

describe("bad environments", () => {
  it("a read-only output folder: exit 4 and one line naming the folder and the cause", async (ctx) => {
    if ("skip" in asUnprivileged) {
      console.warn(`skipped: ${asUnprivileged.skip}`);
      ctx.skip();
      return;
    }
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const readOnly = join(dir, "read-only");
    await mkdir(readOnly);
    await chmod(readOnly, 0o555);
    await chmod(dir, 0o755);
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", join(readOnly, "run")], {
      cwd: dir,
      ...asUnprivileged,
    });
    expect(run.stderr).toBe(
      `nexrl: cannot write to the output folder ${join(readOnly, "run")}: permission denied (the folder is read-only, immutable or owned by another user) (EACCES); choose another with --output-dir (or NEXRL_STORAGE_PATH)\n`,
    );
    expect(run.code).toBe(EXIT_CODES.outputDir);
    expect(await readdir(readOnly)).toEqual([]);
  });

  it.runIf(chattrWorks())(
    "an immutable output folder (chattr +i): exit 4 and one line naming the folder and the cause",
    async () => {
      const dir = await userProject();
      await writeWorker(dir);
      await writeRecipe(dir);
      const immutable = join(dir, "immutable");
      await mkdir(immutable);
      expect(spawnSync("chattr", ["+i", immutable]).status).toBe(0);
      try {
        const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", immutable], { cwd: dir });
        expect(run.stderr).toBe(
          `nexrl: cannot write to the output folder ${immutable}: permission denied (the folder is read-only, immutable or owned by another user) (EPERM); choose another with --output-dir (or NEXRL_STORAGE_PATH)\n`,
        );
        expect(run.code).toBe(EXIT_CODES.outputDir);
      } finally {
        spawnSync("chattr", ["-i", immutable]);
      }
    },
  );

  it("an output path under a file: exit 4 and one line", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    await writeFile(join(dir, "a-file"), "");
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", join(dir, "a-file", "run")], { cwd: dir });
    expect(run.stderr).toBe(
      `nexrl: cannot write to the output folder ${join(dir, "a-file", "run")}: a part of the path is a file, not a folder (ENOTDIR); choose another with --output-dir (or NEXRL_STORAGE_PATH)\n`,
    );
    expect(run.code).toBe(EXIT_CODES.outputDir);
  });

  it("a YAML alias bomb: exit 1 (invalid recipe) with the cause, at once", async () => {
    const dir = await userProject();
    const levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"];
    for (let i = 1; i < 9; i++) {
      const [name, previous] = [String.fromCharCode(97 + i), String.fromCharCode(96 + i)];
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(", ")}]`);
    }
    await writeFile(join(dir, "bomb.yaml"), `${levels.join("\n")}\n`);
    const run = await runCliChild(["validate", "-c", "bomb.yaml"], { cwd: dir });
    expect(run.code).toBe(EXIT_CODES.invalidRecipe);
    expect(run.stderr).toBe(
      `nexrl: invalid recipe\nInvalid recipe ${join(dir, "bomb.yaml")}:\n  - (top level): the YAML cannot be expanded: Excessive alias count indicates a resource exhaustion attack (its aliases, such as *name, expand to more than 100 copies; write the values out instead)\n`,
    );
  });

  it("a recipe refused at module import, or for its data, leaves no run folder behind", async () => {
    const dir = await userProject();
    await writeFile(join(dir, "worker.ts"), `throw new Error("cannot load");\n`);
    await writeRecipe(dir);
    const out = join(dir, "runs", "refused");
    const refused = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: dir });
    expect(refused.code).toBe(EXIT_CODES.invalidRecipe);
    expect(refused.stderr).toContain("cannot load");
    await expect(access(join(dir, "runs"))).rejects.toThrow();

    await writeWorker(dir);
    await writeFile(join(dir, "train.jsonl"), '{"prompt": "a"}\n{"question": "b"}\n');
    const badData = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: dir });
    expect(badData.stderr).toBe(
      `nexrl: ${join(dir, "train.jsonl")}:2 has no field "prompt" (data.prompt_key); its fields are: question. Set data.prompt_key to the field that holds the prompt\n`,
    );
    expect(badData.code).toBe(EXIT_CODES.runFailed);
    await expect(access(join(dir, "runs"))).rejects.toThrow();
    // Lines and rows count from 1 alike: the second line of the file is line 2 as it was row 2.
    await writeFile(join(dir, "train.jsonl"), '{"prompt": "a"}\n{"prompt": \n');
    const badJson = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: dir });
    expect(badJson.stderr).toMatch(new RegExp(`^nexrl: ${join(dir, "train.jsonl")}:2 is not valid JSON`));
  });
});
