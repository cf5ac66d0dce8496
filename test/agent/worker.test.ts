import { describe, expect, it } from "vitest";
import { createAgentWorkerClass } from "../../src/agent/worker-class.js";
import { RolloutRunner } from "../../src/rollouts/runner.js";
import type { InferenceClient } from "../../src/inference/index.js";
import type { Trajectory } from "../../src/contracts/trajectory.js";
import {
  fixture,
  memorisingInference,
  onCleanup,
  recording,
  task,
  tempDir,
  tinyInference,
  tokenizer,
  TOOL_CALL_TEXT,
  writeFiles,
  writeRecipe,
} from "../support/agent.js";
import { ConfigError, UserCodeError } from "../../src/errors.js";
import { workerSettings } from "../../src/recipe/settings.js";

/** The rollout_worker section of a recipe for an agent worker. */
function recipeYaml(worker: string, maxResponseLength: number): string {
  return [
    "data: {data_files: [train.jsonl], prompt_key: question, max_prompt_length: 32, rollout_repeat_n: 2}",
    `rollout_worker: {max_response_length: ${maxResponseLength}, max_sequence_length: 128, ${worker}}`,
    "trainer: {type: remote_api_grpo, total_train_steps: 1}",
    "service: {train_service: {backend: local, model: tiny}}",
    "",
  ].join("\n");
}

/** A runner of one agent worker over `inference`, as the pipeline builds it; the gateway closes after the test. */
async function agentRunner(
  worker: string,
  inference: InferenceClient,
  files: Record<string, string> = {},
  maxResponseLength = 8,
  signal?: AbortSignal,
): Promise<RolloutRunner> {
  const dir = await tempDir();
  await writeFiles(dir, { "train.jsonl": '{"question": "hi"}\n', ...files });
  const recipe = await writeRecipe(dir, recipeYaml(worker, maxResponseLength));
  const stop = new AbortController();
  onCleanup(async () => stop.abort());
  const workerClass = await createAgentWorkerClass(recipe.config, { recipeDir: dir }, stop.signal);
  return new RolloutRunner({
    createWorker: (slot) =>
      new workerClass({ name: `agent-${slot}`, settings: workerSettings(recipe.config), tokenizer }),
    numWorkers: 1,
    timeoutMs: 0,
    policy: { mode: "fail_fast" },
    inference,
    sampling: { temperature: 1, maxTokens: 8 },
    maxSequenceLength: 128,
    currentVersion: () => 0,
    ...(signal && { signal }),
  });
}

const agent = (file: string, name?: string) =>
  `type: agent, agent_module_path: "${fixture(file)}${name ? `:${name}` : ""}"`;
const evaluator = (name: string) => `evaluator_module_path: "${fixture("evaluators.ts")}:${name}"`;

/** Where each call's sampled tokens sit in `t`, with their logprobs, as recorded from the sampler. */
function expectedMaskAndLogprobs(
  t: Trajectory,
  calls: ReadonlyArray<{ result: { promptTokens: number[]; responseTokens: number[]; logprobs: number[] } }>,
) {
  const mask = t.tokens.map(() => 0);
  const logprobs = t.tokens.map(() => 0);
  for (const { result } of calls) {
    result.responseTokens.forEach((_, i) => {
      mask[result.promptTokens.length + i] = 1;
      logprobs[result.promptTokens.length + i] = result.logprobs[i]!;
    });
  }
  return { mask, logprobs };
}

describe("agent worker: agents written with the plain openai package", () => {
  it("turns a well-behaved three-turn episode into one trajectory with exactly the sampler's token ids and logprobs", async () => {
    const inference = recording(await tinyInference());
    const runner = await agentRunner(`${agent("openai-agent.ts")}, ${evaluator("ParityEvaluator")}`, inference.client);
    const outcome = await runner.run(task({ question: "hi" }));
    expect(inference.calls).toHaveLength(3);
    for (let k = 1; k < 3; k++) {
      const previous = inference.calls[k - 1]!.result;
      expect(
        inference.calls[k]!.result.promptTokens.slice(0, previous.promptTokens.length + previous.responseTokens.length),
      ).toEqual([...previous.promptTokens, ...previous.responseTokens]);
    }
    expect(outcome.trajectories).toHaveLength(1);
    const t = outcome.trajectories[0]!;
    const last = inference.calls[2]!.result;
    expect(t.tokens).toEqual([...last.promptTokens, ...last.responseTokens]);
    const { mask, logprobs } = expectedMaskAndLogprobs(t, inference.calls);
    expect(t.lossMask).toEqual(mask);
    expect(t.logprobs).toEqual(logprobs);
    const answer = tokenizer.decode(last.responseTokens);
    expect(t.reward).toBe(answer.length % 2 === 0 ? 1 : 0);
    expect([t.groupId, t.runId, t.policyVersion, t.isVal]).toEqual(["g0", 0, 0, false]);
    expect(t).toMatchObject({
      lossWeight: 1,
      score: { reward_score: t.reward, answer_chars: answer.length },
      counters: {
        "agent/episodes": 1,
        "agent/trajectories": 1,
        "agent/calls": 3,
        "agent/prefix_breaks": 0,
        "agent/truncated_episodes": 0,
      },
      extraFields: {
        response: answer,
        evaluation: { turns_seen: 6, truncated: false },
        agent: { turns: [1, 2, 3], truncated: false },
      },
    });
    expect(t.extraFields.diagnostics).toBeUndefined();
  });

  it("makes a trajectory of each call with enable_trace_prefix_merge: false, each with its call's tokens", async () => {
    const inference = recording(await tinyInference());
    const runner = await agentRunner(
      `${agent("openai-agent.ts")}, ${evaluator("ParityEvaluator")}, enable_trace_prefix_merge: false`,
      inference.client,
    );
    const outcome = await runner.run(task({ question: "hi" }));
    expect(inference.calls).toHaveLength(3);
    expect(outcome.trajectories.map((t) => t.tokens)).toEqual(
      inference.calls.map(({ result }) => [...result.promptTokens, ...result.responseTokens]),
    );
    expect(outcome.trajectories.map((t) => t.lossWeight)).toEqual([1 / 3, 1 / 3, 1 / 3]);
    expect(outcome.trajectories[0]!.counters).toMatchObject({ "agent/prefix_breaks": 0 });
  });

  it("splits a drifting agent's episode at every break, explains each, and weights the pieces 1/3", async () => {
    const inference = recording(await tinyInference());
    const runner = await agentRunner(
      `${agent("drifting-agent.ts", "drift")}, ${evaluator("ParityEvaluator")}`,
      inference.client,
    );
    const { trajectories } = await runner.run(task({ question: "hi" }));
    expect(trajectories).toHaveLength(3);
    trajectories.forEach((t, k) => {
      const { result } = inference.calls[k]!;
      expect(t.tokens).toEqual([...result.promptTokens, ...result.responseTokens]);
      expect(t.logprobs).toEqual([...result.promptTokens.map(() => 0), ...result.logprobs]);
      expect(t.lossWeight).toBeCloseTo(1 / 3, 12);
      expect(t.reward).toBe(trajectories[0]!.reward);
    });
    expect(trajectories[0]!.counters).toMatchObject({ "agent/prefix_breaks": 2, "agent/trajectories": 3 });
    const at = tokenizer.applyChatTemplate([{ role: "user", content: "hi (attempt " }]).length - 1;
    expect(trajectories[1]!.extraFields.diagnostics).toEqual([
      expect.objectContaining({
        kind: "prefix_break",
        turn: 2,
        previous_turn: 1,
        first_differing_index: at,
        expected_token: "1".charCodeAt(0),
        actual_token: "2".charCodeAt(0),
        context: "<|user|>\nhi (attempt ",
      }),
    ]);
    const diagnostic = (
      trajectories[2]!.extraFields.diagnostics as Array<{ expected: string; actual: string; message: string }>
    )[0]!;
    expect(diagnostic.expected.startsWith("2)")).toBe(true);
    expect(diagnostic.actual.startsWith("3)")).toBe(true);
    expect(diagnostic.message).toMatch(/^turn 3 does not continue turn 2: they first differ at token \d+/);
  });
});

describe("agent worker: limits and failures", () => {
  it("truncates an episode at max_turns and gives it the truncated reward", async () => {
    const runner = await agentRunner(
      `${agent("scripted-agents.ts", "Insatiable")}, ${evaluator("ParityEvaluator")}, agent: {max_turns: 3, truncated_reward: -1}`,
      await tinyInference(),
    );
    const { trajectories } = await runner.run(task({ question: "hi" }));
    expect(trajectories.map((t) => t.reward)).toEqual([-1, -1, -1]);
    expect(trajectories[0]).toMatchObject({
      extraFields: { is_truncated: true, agent: { truncated: true, truncation_reason: "max_turns" } },
      counters: { "agent/calls": 3, "agent/truncated_episodes": 1 },
    });
  });

  it("cuts an episode short at timeout_seconds and scores what was recorded", async () => {
    const runner = await agentRunner(
      `${agent("scripted-agents.ts", "slow")}, ${evaluator("ParityEvaluator")}, agent: {timeout_seconds: 0.2}`,
      await tinyInference(),
    );
    const { trajectories } = await runner.run(task({ question: "hi" }));
    expect(trajectories).toHaveLength(1);
    expect(trajectories[0]!.reward).toBe(0);
    expect(trajectories[0]!.extraFields).toMatchObject({
      agent: { truncation_reason: "timeout" },
      evaluation: { truncated: true },
    });
  });

  it("fails the rollout when the evaluator does not settle within the episode's timeout, and ends it when the run stops", async () => {
    const hung = await agentRunner(
      `${agent("scripted-agents.ts", "unscored")}, ${evaluator("NeverSettlingEvaluator")}, agent: {timeout_seconds: 1}`,
      await tinyInference(),
    );
    await expect(hung.run(task({ question: "hi" }))).rejects.toThrow(
      /NeverSettlingEvaluator\.evaluate did not settle within rollout_worker\.agent\.timeout_seconds \(1 s\) for row 1; make it return \(or throw\) sooner, or raise the timeout/,
    );
    // With an hour to go, a stop of the run ends the rollout at once.
    const stop = new AbortController();
    const stopped = await agentRunner(
      `${agent("scripted-agents.ts", "unscored")}, ${evaluator("NeverSettlingEvaluator")}, agent: {timeout_seconds: 3600}`,
      await tinyInference(),
      {},
      8,
      stop.signal,
    );
    const outcome = stopped.run(task({ question: "hi" }));
    setTimeout(() => stop.abort(new Error("the run was stopped")), 500);
    await expect(outcome).resolves.toMatchObject({ status: "aborted", trajectories: [] });
  });

  it("fails the rollout when the agent throws for its own reasons or nothing can score it; takes evaluator classes and functions", async () => {
    const broken = await agentRunner(
      `${agent("scripted-agents.ts", "broken")}, ${evaluator("ParityEvaluator")}`,
      await tinyInference(),
    );
    await expect(broken.run(task({ question: "hi" }))).rejects.toThrow(
      /failed after 1 attempt\(s\): Error: the agent's tool crashed\n {4}at .*\/scripted-agents\.ts:\d+:\d+ \(broken\)\nA retry would fail the same way/,
    );
    const unscored = await agentRunner(agent("scripted-agents.ts", "unscored"), await tinyInference());
    await expect(unscored.run(task({ question: "hi" }))).rejects.toThrow(
      /no evaluator is configured and the agent returned a string; set rollout_worker\.evaluator_module_path/,
    );
    const wrong = await agentRunner(
      `${agent("scripted-agents.ts", "unscored")}, ${evaluator("WrongEvaluator")}`,
      await tinyInference(),
    );
    await expect(wrong.run(task({ question: "hi" }))).rejects.toThrow(
      /WrongEvaluator\.evaluate returned \{"reward":null\} for row 1; return \{ reward: <finite number>/,
    );
    const byFunction = await agentRunner(
      `${agent("scripted-agents.ts", "unscored")}, ${evaluator("scoreAnswer")}`,
      await tinyInference(),
    );
    const [scored] = (await byFunction.run(task({ question: "hi", answer: "?" }))).trajectories;
    expect([scored!.reward, scored!.extraFields.evaluation]).toEqual([0.75, { expected: "?" }]);
    const noVerdict = await agentRunner(
      `${agent("scripted-agents.ts", "unscored")}, ${evaluator("noVerdict")}`,
      await tinyInference(),
    );
    await expect(noVerdict.run(task({ question: "hi" }))).rejects.toThrow(
      /noVerdict\.evaluate returned "fine" for row 1/,
    );
    const selfScoring = await agentRunner(agent("scripted-agents.ts", "selfScoring"), await tinyInference());
    expect((await selfScoring.run(task({ question: "hi" }))).trajectories.map((t) => t.reward)).toEqual([0.25]);
  });

  it("fails an episode with no recorded call, saying whether no call reached the gateway or all failed, and what to check", async () => {
    const check =
      "there is nothing to train on; check that the agent passes context.baseURL (its AgentContext's base URL, ending in /v1) to its SDK's base-URL option unchanged";
    const failure = async (name: string) => {
      const runner = await agentRunner(
        `${agent("unreachable-agents.ts", name)}, ${evaluator("ParityEvaluator")}`,
        await tinyInference(),
      );
      const error = await runner.run(task({ question: "hi" })).then(
        () => undefined,
        (e: unknown) => e as Error & { cause?: unknown },
      );
      expect(error?.cause).toBeInstanceOf(UserCodeError);
      expect((error!.cause as UserCodeError).problem).toBe("agent_result");
      return (error!.cause as UserCodeError).message;
    };
    expect(await failure("noCall")).toBe(
      `no model call of this episode reached the agent gateway, and the agent returned: ${check} (openai: new OpenAI({ baseURL }); AI SDK: createOpenAI({ baseURL }); LangChain: new ChatOpenAI({ configuration: { baseURL } })) and calls the model with context.model; docs/guides/agents.md shows each SDK`,
    );
    const notFound =
      "404 no route POST /rollouts/{rolloutId}/chat/completions; the gateway serves /rollouts/{rolloutId}/v1/{";
    // Both swallowed 404s are counted, the first quoted with the rollout's random id as a placeholder.
    const swallowed = await failure("wrongPathSwallowed");
    expect(swallowed).toMatch(
      `none of the 2 request(s) this episode sent to the agent gateway succeeded (the first: ${notFound}`,
    );
    expect(swallowed).toMatch(`POST /tasks/claim and POST /trajectories), and the agent returned: ${check}`);
    const thrown = await failure("wrongPathThrows");
    expect(thrown).toMatch(
      `none of the 1 request(s) this episode sent to the agent gateway succeeded (the first: ${notFound}`,
    );
    expect(thrown).toMatch(`POST /tasks/claim and POST /trajectories), and the agent then threw that error: ${check}`);
  });

  it("explains agent modules that cannot be used", async () => {
    await expect(agentRunner('type: agent, agent_module_path: "missing.ts"', await tinyInference())).rejects.toThrow(
      /rollout_worker\.agent_module_path: `missing\.ts` not found; tried .*missing\.ts \(beside the recipe\)/,
    );
    await expect(agentRunner(agent("scripted-agents.ts", "nope"), await tinyInference())).rejects.toThrow(
      /has no export `nope` \(its exports: Insatiable, broken, selfScoring, slow, unscored\)/,
    );
    await expect(agentRunner(agent("scripted-agents.ts"), await tinyInference())).rejects.toThrow(ConfigError);
  });
});

describe("agent worker: declarative agents (agent_config.yaml)", () => {
  const tools = {
    "workspace/tools/F.yaml":
      "type: tool\nname: f\ndescription: looks k up\ninput_schema:\n  type: object\n  properties:\n    k: {type: string}\n  required: [k]\n",
    "workspace/tools/f.ts":
      'export function lookup(args: { k?: string }): string {\n  return args.k === "a" ? "7" : "unknown key";\n}\n',
    "workspace/evaluator.ts": `export { Evaluator } from "${fixture("evaluators.ts")}";\n`,
  };

  it("runs the tool-calling loop through the gateway: the tool's answer is in the prompt, the sampled tokens are trained", async () => {
    const config =
      "type: agent\nname: finder\nmax_turns: 4\nllm_config:\n  temperature: 0\n  max_tokens: 80\n  api_type: openai_chat_completion\ntools:\n  - name: f\n    yaml_path: tools/F.yaml\n    binding: tools/f.ts:lookup\ntracers:\n  - import: nexau.archs.tracer.adapters.in_memory:InMemoryTracer\n";
    const inference = recording(await memorisingInference());
    const worker =
      'type: nexau, nexau_agent_config_path: workspace/agent_config.yaml, nexau_agent_workspace: workspace, evaluator_module_path: "workspace/evaluator.ts:Evaluator", task_name: finder';
    const runner = await agentRunner(worker, inference.client, { ...tools, "workspace/agent_config.yaml": config }, 80);
    const { trajectories } = await runner.run(task({ question: "find a", answer: "7" }, { prompt: "find a" }));
    expect(trajectories).toHaveLength(1);
    const t = trajectories[0]!;
    expect(tokenizer.decode(t.tokens)).toBe(
      `<|user|>\nfind a<|assistant|>\n${TOOL_CALL_TEXT}<|tool|>\n7<|assistant|>\n7`,
    );
    const { mask, logprobs } = expectedMaskAndLogprobs(t, inference.calls);
    expect(t.lossMask).toEqual(mask);
    expect(t.logprobs).toEqual(logprobs);
    expect(t.reward).toBe(1);
    expect(t).toMatchObject({
      extraFields: { response: "7", task_name: "finder" },
      counters: { "agent/tool_calls": 1, "agent/prefix_breaks": 0 },
    });
    const oneTurn = await agentRunner(
      worker,
      inference.client,
      { ...tools, "workspace/agent_config.yaml": config.replace("max_turns: 4", "max_turns: 1") },
      80,
    );
    const [cut] = (await oneTurn.run(task({ question: "find a", answer: "7" }, { prompt: "find a" }))).trajectories;
    expect([cut!.reward, tokenizer.decode(cut!.tokens)]).toEqual([
      0,
      `<|user|>\nfind a<|assistant|>\n${TOOL_CALL_TEXT}`,
    ]);
    expect(cut!.extraFields).toMatchObject({ is_truncated: true, agent: { truncation_reason: "agent_max_turns" } });
  });

  it("renders the system prompt with the date and the task's fields, and explains bad tool bindings", async () => {
    const config =
      "system_prompt: |\n  Date: {{date}}. Task {{task_name}}: {{question}}\nmax_turns: 1\nllm_config: {max_tokens: 4, top_p: 0.5}\n";
    const inference = recording(await tinyInference());
    const worker =
      'type: nexau, nexau_agent_config_path: workspace/agent_config.yaml, evaluator_module_path: "workspace/evaluator.ts:Evaluator", task_name: demo';
    const runner = await agentRunner(worker, inference.client, { ...tools, "workspace/agent_config.yaml": config });
    const { trajectories } = await runner.run(task({ question: "what now?" }, { prompt: "what now?" }));
    const today = new Date().toISOString().slice(0, 10);
    expect(tokenizer.decode(inference.calls[0]!.result.promptTokens)).toBe(
      `<|system|>\nDate: ${today}. Task demo: what now?<|user|>\nwhat now?<|assistant|>\n`,
    );
    // llm_config reaches the model call: the loop sends DeclarativeAgentConfig.llm as max_tokens and top_p.
    expect(inference.calls[0]!.options).toMatchObject({ maxTokens: 4, topP: 0.5 });
    expect(trajectories[0]!.extraFields).toMatchObject({
      is_truncated: false,
      response: tokenizer.decode(inference.calls[0]!.result.responseTokens),
    });
    const python =
      "tools:\n  - name: f\n    yaml_path: tools/F.yaml\n    binding: nexau.archs.tool.builtin.web_tool:web_search\n";
    await expect(
      agentRunner(worker, inference.client, { ...tools, "workspace/agent_config.yaml": python }),
    ).rejects.toThrow(
      /tools\[0\]\.binding: "nexau\.archs\.tool\.builtin\.web_tool:web_search" is not a TypeScript binding; write it as path\/to\/file\.ts:functionName/,
    );
    const missing = "tools:\n  - name: f\n    yaml_path: tools/Nope.yaml\n    binding: tools/f.ts:lookup\n";
    await expect(
      agentRunner(worker, inference.client, { ...tools, "workspace/agent_config.yaml": missing }),
    ).rejects.toThrow(/tools\[0\]\.yaml_path: `tools\/Nope\.yaml` not found/);
  });
});
