/**
 * The command line's habits, through the built CLI as a child process: per-command help, the
 * command list on an unknown command, "did you mean" for options, one meaning per short flag,
 * and `nexrl train -c` beside NexRL's form.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { COMMANDS, COMMAND_NAMES } from "../../src/cli/commands.js";
import { pigLatinRecipe, runNexrl, tempDir } from "../support/runs.js";

const COMMAND_LIST =
  "The commands are train, validate, serve, worker, report, sample, export, checkpoints, and NexRL's form";

describe("the nexrl command line (the built CLI)", () => {
  it("prints each command's own usage, options and example for COMMAND --help", async () => {
    const general = await runNexrl(["--help"]);
    expect(general.code).toBe(EXIT_CODES.ok);
    for (const name of COMMAND_NAMES) {
      const help = await runNexrl([name, "--help"]);
      expect([help.code, help.stderr]).toEqual([EXIT_CODES.ok, ""]);
      expect(help.stdout).not.toBe(general.stdout);
      expect(help.stdout).toMatch(new RegExp(`^nexrl ${name} \\(nexrl [^)]+\\) — `));
      expect(help.stdout).toMatch(new RegExp(`\\nUsage:\\n  nexrl ${name} `));
      expect(help.stdout).toMatch(new RegExp(`\\nExamples:\\n  nexrl ${name} `));
      expect(help.stdout).toContain("  -h, --help");
      // `nexrl help COMMAND` says the same.
      expect((await runNexrl(["help", name])).stdout).toBe(help.stdout);
    }
    const train = await runNexrl(["train", "-h"]);
    expect(train.stdout).toContain("  -c, --train-config PATH");
    expect(train.stdout).not.toContain("--protocol");
    const serve = await runNexrl(["serve", "--help"]);
    expect(serve.stdout).toContain("  -p, --protocol PROTOCOL");
    expect(serve.stdout).not.toContain("--train-config");
    expect(general.stdout).toMatch(
      /Commands \(`nexrl COMMAND --help` for each one's options and examples\):\n {2}train /,
    );
  }, 60_000);

  it("lists the commands for an unknown command, with the closest one", async () => {
    const run = await runNexrl(["run", "-c", "recipe.yaml"]);
    expect(run.code).toBe(EXIT_CODES.usage);
    expect(run.stderr).toContain('nexrl: unknown command "run"; did you mean "train"?');
    expect(run.stderr).toContain(COMMAND_LIST);
    const typo = await runNexrl(["valdate", "-c", "recipe.yaml"]);
    expect(typo.code).toBe(EXIT_CODES.usage);
    expect(typo.stderr).toContain('unknown command "valdate"; did you mean "validate"?');
    expect((await runNexrl(["frobnicate"])).stderr).toMatch(/^nexrl: unknown command "frobnicate"\nThe commands are/);
    expect((await runNexrl(["help", "srve"])).stderr).toContain('did you mean "serve"?');
    // A stray argument after NexRL's options lists them too, not just "validate".
    const stray = await runNexrl(["-c", "recipe.yaml", "extra"]);
    expect(stray.stderr).toContain('unexpected argument "extra"; overrides look like key.path=value');
    expect(stray.stderr).not.toContain("the only command is validate");
  }, 60_000);

  it("answers a mistyped option with the closest one and the command's help, never Node's parseArgs text", async () => {
    const cases: Array<[string[], string]> = [
      [["train", "-c", "r.yaml", "--tga", "x"], "nexrl train has no option --tga; did you mean -t, --tag TAG?"],
      [["--run-nexr", "-c", "r.yaml"], "nexrl has no option --run-nexr; did you mean -r, --run-nexrl?"],
      [["serve", "--prot", "openai"], "nexrl serve has no option --prot; did you mean -p, --protocol PROTOCOL?"],
      [["report", "r", "-o", "x.html"], "nexrl report has no option -o; did you mean --output FILE?"],
      [["sample", "r", "-t", "0"], "nexrl sample has no option -t; did you mean --temperature T?"],
      [["validate", "-c"], "-c, --train-config PATH needs a value after it (PATH)"],
    ];
    for (const [argv, message] of cases) {
      const run = await runNexrl(argv);
      expect([run.code, run.stdout]).toEqual([EXIT_CODES.usage, ""]);
      expect(run.stderr).toContain(`nexrl: ${message}`);
      expect(run.stderr).toMatch(/Run `nexrl( \w+)? --help` for its options\.\n$/);
      expect(run.stderr).not.toMatch(/Unknown option|ERR_PARSE_ARGS|To specify a positional argument/);
    }
    // A command only takes its own options: validate runs nothing, so it has no --tag.
    expect((await runNexrl(["validate", "-c", "r.yaml", "--tag", "x"])).stderr).toContain(
      "nexrl validate has no option --tag",
    );
  }, 60_000);

  it("gives each short flag one meaning in every command that has it", () => {
    const meaning = new Map<string, string>();
    const clashes: string[] = [];
    for (const command of COMMANDS)
      for (const [name, option] of Object.entries(command.options)) {
        if (option.short === undefined) continue;
        const seen = meaning.get(option.short);
        if (seen !== undefined && seen !== name)
          clashes.push(`-${option.short}: --${seen} and --${name} (${command.name})`);
        meaning.set(option.short, name);
      }
    expect(clashes).toEqual([]);
    expect(Object.fromEntries(meaning)).toMatchObject({
      c: "train-config",
      m: "mode",
      t: "tag",
      o: "output-dir",
    });
  });

  it("trains with the short nexrl train -c, as NexRL's -m training-service -c … --run-nexrl does", async () => {
    const dir = await tempDir();
    const short = await runNexrl(["train", "-c", pigLatinRecipe, "-o", join(dir, "a"), "trainer.total_train_steps=2"]);
    expect([short.code, short.stderr]).toEqual([EXIT_CODES.ok, ""]);
    expect(short.stdout).toMatch(/step 2\/2 \| /);
    const nexrl = await runNexrl([
      "-m",
      "training-service",
      "-c",
      pigLatinRecipe,
      "--run-nexrl",
      "-o",
      join(dir, "b"),
      "trainer.total_train_steps=2",
    ]);
    expect([nexrl.code, nexrl.stderr]).toEqual([EXIT_CODES.ok, ""]);
    const metrics = async (run: string) =>
      (await readFile(join(dir, run, "metrics.jsonl"), "utf8"))
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { step: number; "train/loss": number })["train/loss"]);
    // The same recipe and seed: the same losses.
    expect(await metrics("a")).toEqual(await metrics("b"));
    expect((await metrics("a")).length).toBe(2);
  }, 120_000);
});
