/**
 * Broken agents fail loudly (issue 25, item 6): a run of an agent that never reaches the policy —
 * it makes no call, or every call goes to a path the gateway does not serve — exits non-zero with
 * a message naming the cause, and prints the first failure of each kind once, with no stacks.
 * Runs the built CLI (`npm run build` first).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runNexrl, tempDir } from "../support/runs.js";
import { fixture } from "../support/agent.js";

/** A folder with a two-step GRPO recipe on the tiny local model whose agent is `name` of the unreachable agents. */
async function project(name: string): Promise<string> {
  const dir = await tempDir("nexrl-broken-agent-");
  const rows = ["hi", "hello", "hey", "yo"].map((question) => JSON.stringify({ question })).join("\n");
  await writeFile(join(dir, "train.jsonl"), `${rows}\n`);
  await writeFile(
    join(dir, "recipe.yaml"),
    [
      "data: {data_files: [train.jsonl], prompt_key: question, batch_size: 2, rollout_repeat_n: 2, max_prompt_length: 32, seed: 1}",
      `rollout_worker: {type: agent, agent_module_path: "${fixture("unreachable-agents.ts")}:${name}", evaluator_module_path: "${fixture("evaluators.ts")}:ParityEvaluator", num_workers: 2, max_response_length: 8, max_sequence_length: 128}`,
      "trajectory_pool: {batch_size: 4}",
      "trainer: {type: remote_api_grpo, total_train_steps: 2}",
      "service: {train_service: {backend: local, model: tiny, config: {loss_fn: importance_sampling, learning_rate: 1e-3}}}",
      "",
    ].join("\n"),
  );
  return dir;
}

const CHECK =
  "check that the agent passes context.baseURL (its AgentContext's base URL, ending in /v1) to its SDK's base-URL option";

describe("a run of an agent whose calls never reach the policy", () => {
  it("exits non-zero naming the cause: an agent that makes no call stops the run at its first rollout", async () => {
    const dir = await project("noCall");
    const run = await runNexrl(["-c", "recipe.yaml", "-o", "run", "--run-nexrl"], { cwd: dir });
    expect(run.code).toBe(EXIT_CODES.runFailed);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^nexrl: rollout of row \d \(group 0-\d, run \d\) failed after 1 attempt\(s\): no model call of this episode reached the agent gateway, and the agent returned: there is nothing to train on; /,
    );
    expect(lines[0]).toContain(CHECK);
    expect(lines[1]).toMatch(/^A retry would fail the same way: fix the cause/);
    expect(run.stdout).not.toMatch(/completed|done after step/);
  });

  it("with the continue policy, calls that all 404 stop the run at a step with no successful rollout; the failure shows once", async () => {
    const dir = await project("wrongPathSwallowed");
    const run = await runNexrl(
      ["-c", "recipe.yaml", "-o", "run", "--run-nexrl", "runtime_monitor.exception_handling.policy=continue"],
      { cwd: dir },
    );
    expect(run.code).toBe(EXIT_CODES.noRolloutSucceeded);
    expect(run.stderr).toMatch(
      /^nexrl: step 1 has no successful rollout: all 4 of its rollouts failed \(4 failed attempts\) and the continue policy skipped them/,
    );
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    // Four rollouts failed the same way: the console shows the first, failures.jsonl has them all.
    const warnings = run.stdout.split("\n").filter((line) => line.startsWith("warning: rollout of row"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      "UserCodeError: none of the 2 request(s) this episode sent to the agent gateway succeeded (the first: 404 no route POST /rollouts/{rolloutId}/chat/completions;",
    );
    expect(warnings[0]).toContain(CHECK);
    expect(`${run.stdout}${run.stderr}`).not.toMatch(/^\s+at /m);
    expect(run.stdout.split("\n").length).toBeLessThan(15);
    const failures = (await readFile(join(dir, "run", "failures.jsonl"), "utf8")).trimEnd().split("\n");
    expect(failures.map((line) => (JSON.parse(line) as { kind: string; error: string }).error)).toEqual(
      Array(4).fill("UserCodeError"),
    );
  });
});
