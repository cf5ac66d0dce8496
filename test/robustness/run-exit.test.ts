/** Issue 13, item 12: a finished run's process exits at once, even when an agent cut off by its timeout is still waiting. */
import { spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { ROOT, startCli, userProject } from "../support/user-project.js";

const AGENT_TOOLS = join(ROOT, "recipe/agent_tools");
/** How long the misbehaving agent sleeps after its episode was cut off (it ignores its abort signal). */
const AGENT_SLEEP_MS = 300_000;

/** An agent recipe on the tiny engine, one step of 2 episodes: the agent is `agentSource` as agent.ts, else the recipe's own. */
async function agentProject(agentSource?: string): Promise<string> {
  const dir = await userProject(0);
  if (agentSource !== undefined) await writeFile(join(dir, "agent.ts"), agentSource);
  await writeFile(
    join(dir, "recipe.yaml"),
    `defaults: [${join(AGENT_TOOLS, "local.yaml")}, _self_]
init: null  # no warm start: the untrained model is enough to end a run
data: {batch_size: 1, rollout_repeat_n: 2, data_files: [${join(AGENT_TOOLS, "data/train.jsonl")}]}
rollout_worker:
  agent_module_path: ${agentSource === undefined ? join(AGENT_TOOLS, "agent.ts") : "agent.ts"}
  evaluator_module_path: ${join(AGENT_TOOLS, "agent_workspace/evaluator.ts")}:evaluate
  num_workers: 2
  agent: {timeout_seconds: 1}
trainer: {total_train_steps: 1}
validate: {eval: {validate_freq: 0}, data: {data_files: [${join(AGENT_TOOLS, "data/test.jsonl")}]}}
`,
  );
  return dir;
}

describe("the end of a run", () => {
  it(
    "the CLI exits right after 'done' although an agent cut off after timeout_seconds still sleeps",
    { timeout: 200_000 },
    async () => {
      const dir = await agentProject(`import OpenAI from "openai";
export default async function sleepy(_task: unknown, { baseURL, model }: { baseURL: string; model: string }) {
  const openai = new OpenAI({ baseURL, apiKey: "x" });
  await openai.completions.create({ model, prompt: "x", max_tokens: 2 });
  await new Promise((resolve) => setTimeout(resolve, ${AGENT_SLEEP_MS}));
  return { final_answer: "late", reward: 0 };
}
`);
      const run = startCli(["-c", "recipe.yaml", "-r", "-o", join(dir, "out")], { cwd: dir });
      await run.waitFor("done after step 1");
      const doneAt = performance.now();
      const result = await run.done;
      const lingered = performance.now() - doneAt;
      expect(result.code).toBe(EXIT_CODES.ok);
      expect(result.stdout).toContain("reward 0.000");
      // Without the fix the process waits for the agent's timer: AGENT_SLEEP_MS after the episode's timeout.
      expect(lingered).toBeLessThan(AGENT_SLEEP_MS / 3);
    },
  );

  it("runRecipe leaves no timer, socket or server of its own behind: a script that only runs it exits by itself", async () => {
    const dir = await agentProject();
    const script = `import { runRecipe } from "nexrl";
const result = await runRecipe("recipe.yaml", { outputDir: "out" });
console.log("steps", result.steps);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(out).toBe("steps 1\n");
    expect(code).toBe(0);
  });
});
