import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { calc, evaluateExpression } from "../../recipe/agent_tools/agent_workspace/tools/calc.js";
import { evaluate } from "../../recipe/agent_tools/agent_workspace/evaluator.js";
import { get } from "../../recipe/agent_tools/agent_workspace/tools/get.js";
import { makeData, renderFiles, type ToolRow } from "../../recipe/agent_tools/data/make_data.js";
import { createAgentWorkerClass } from "../../src/agent/worker-class.js";
import { RolloutRunner } from "../../src/rollouts/runner.js";
import { runRecipe } from "../../src/index.js";
import { loadRecipe } from "../../src/recipe/index.js";
import type { ChatMessage } from "../../src/wire/tokenizer.js";
import { memorisingInference, onCleanup, recording, task, tempDir, tokenizer } from "../support/agent.js";
import { workerSettings } from "../../src/recipe/settings.js";

const RECIPE = fileURLToPath(new URL("../../recipe/agent_tools/", import.meta.url));
const rows = (name: string): ToolRow[] =>
  readFileSync(join(RECIPE, "data", name), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as ToolRow);

/** A right episode of `row`: question, tool call, tool result, answer. */
function episode(row: ToolRow): ChatMessage[] {
  const call = `<tool_call>${JSON.stringify({ name: row.tool, arguments: row.arguments })}</tool_call>`;
  return [
    { role: "user", content: row.question },
    { role: "assistant", content: call },
    { role: "tool", content: row.answer },
    { role: "assistant", content: row.answer },
  ];
}

describe("recipe/agent_tools data and tools", () => {
  it("ships what data/make_data.ts produces", () => {
    for (const [name, content] of Object.entries(renderFiles()))
      expect(readFileSync(join(RECIPE, "data", name), "utf8"), name).toBe(content);
  });

  it("has answers the tools give, test animals the train split never asks about, and episodes that fit the tiny model's 128 tokens", () => {
    const { codes } = makeData();
    const [train, test] = [rows("train.jsonl"), rows("test.jsonl")];
    expect([train.length, test.length]).toEqual([400, 40]);
    for (const row of [...train, ...test]) {
      const result = row.tool === "get" ? get(row.arguments as { k: string }) : calc(row.arguments as { e: string });
      expect(result).toBe(row.answer);
      expect(tokenizer.applyChatTemplate(episode(row)).length).toBeLessThanOrEqual(128);
    }
    const asked = (split: ToolRow[]) =>
      new Set(split.filter((r) => r.tool === "get").map((r) => (r.arguments as { k: string }).k));
    const trainAnimals = asked(train);
    expect([...asked(test)].filter((animal) => trainAnimals.has(animal))).toEqual([]);
    expect(Object.keys(codes)).toHaveLength(48);
  });

  it("calc evaluates + - * and parentheses and refuses anything else; get knows only the codes", () => {
    expect([
      evaluateExpression("37*41"),
      evaluateExpression("2+3*4"),
      evaluateExpression("(2+3)*4"),
      evaluateExpression("-5+10-2"),
    ]).toEqual([1517, 14, 20, 3]);
    expect(() => evaluateExpression("2/3")).toThrow('unexpected "/" in "2/3"');
    expect(() => evaluateExpression("process.exit()")).toThrow(/is not allowed/);
    expect(() => evaluateExpression("(1+2")).toThrow(/ends too early/);
    expect(get({ k: "unicorn" })).toBe('no code for "unicorn"');
  });

  it("rewards the right answer after the right call (1), the right call (0.5), any call (0.2), nothing else", () => {
    const row = rows("train.jsonl")[0]!;
    const history = (args: unknown, result: string): ChatMessage[] => [
      { role: "user", content: row.question },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "c", type: "function", function: { name: row.tool, arguments: JSON.stringify(args) } }],
      },
      { role: "tool", content: result, tool_call_id: "c" },
    ];
    const score = (finalAnswer: string, observation: ChatMessage[]) =>
      evaluate(row as unknown as Record<string, unknown>, { finalAnswer, observation, isTruncated: false }).reward;
    expect(score(row.answer, history(row.arguments, row.answer))).toBe(1);
    expect(score("0", history(row.arguments, row.answer))).toBe(0.5);
    expect(score(row.answer, history({ k: "zzz" }, "?"))).toBe(0.2);
    expect(score(row.answer, [{ role: "user", content: row.question }])).toBe(0);
  });
});

describe("recipe/agent_tools warm start (sft_worker.ts)", () => {
  it("demonstrates the right tool call one time in four and a wrong guess of the answer's length otherwise, training the assistant turns only", async () => {
    const { ToolsSftWorker } = await import("../../recipe/agent_tools/sft_worker.js");
    const worker = new ToolsSftWorker({ name: "w", settings: {} as never, tokenizer });
    const train = rows("train.jsonl").slice(0, 12);
    train.forEach((row, n) => {
      const t = worker.rollout(task(row as unknown as Record<string, unknown>));
      const trained = tokenizer.decode(t.tokens.filter((_, i) => t.lossMask[i] === 1));
      if (n % 4 === 0) {
        expect(t.tokens).toEqual(tokenizer.applyChatTemplate(episode(row)));
        expect(trained).toBe(
          `<tool_call>${JSON.stringify({ name: row.tool, arguments: row.arguments })}</tool_call>${row.answer}`,
        );
        return;
      }
      const guess = trained;
      expect(guess).toMatch(/^[1-9][0-9]*$/);
      expect(guess).toHaveLength(row.answer.length);
      expect(guess).not.toBe(row.answer);
      expect(t.tokens).toEqual(
        tokenizer.applyChatTemplate([
          { role: "user", content: row.question },
          { role: "assistant", content: guess },
        ]),
      );
    });
  });
});

describe("recipe/agent_tools through the gateway", () => {
  it("agent.ts, the tools and the evaluator score a model that answers right with reward 1, in one trajectory per episode", async () => {
    const { config, dir } = await loadRecipe(join(RECIPE, "local.yaml"), { env: {} });
    const row = rows("train.jsonl")[0]!;
    const inference = recording(await memorisingInference([episode(row)], 150));
    const stop = new AbortController();
    onCleanup(async () => stop.abort());
    const workerClass = await createAgentWorkerClass(
      { ...config, rollout_worker: { ...config.rollout_worker, temperature: 0 } },
      { recipeDir: dir },
      stop.signal,
    );
    const runner = new RolloutRunner({
      createWorker: (slot) => new workerClass({ name: `agent-${slot}`, settings: workerSettings(config), tokenizer }),
      numWorkers: 1,
      timeoutMs: 0,
      policy: { mode: "fail_fast" },
      inference: inference.client,
      sampling: { temperature: 0, maxTokens: config.rollout_worker.max_response_length },
      maxSequenceLength: 128,
      currentVersion: () => 0,
    });
    const { trajectories } = await runner.run(
      task(row as unknown as Record<string, unknown>, { prompt: row.question }),
    );
    expect(trajectories).toHaveLength(1);
    const t = trajectories[0]!;
    expect(t.tokens).toEqual(tokenizer.applyChatTemplate(episode(row)));
    expect(t.reward).toBe(1);
    expect(t).toMatchObject({
      score: { reward_score: 1, correct: 1, right_tool_call: 1, tool_calls: 1 },
      counters: { "agent/calls": 2, "agent/tool_calls": 1, "agent/prefix_breaks": 0 },
    });
    const trained = t.lossMask.flatMap((m, i) => (m === 1 ? [i] : []));
    const sampled = inference.calls.flatMap((c) =>
      c.result.responseTokens.map((_, i) => c.result.promptTokens.length + i),
    );
    expect(trained).toEqual(sampled);
  });

  it("local.yaml runs end to end with runRecipe (two steps here, without its warm start)", async () => {
    const dir = await tempDir();
    const result = await runRecipe(join(RECIPE, "local.yaml"), {
      outputDir: join(dir, "run"),
      env: {},
      // test/recipe/local-runs.test.ts runs it with its warm start (init.from_recipe)
      overrides: [
        "init=null",
        "trainer.total_train_steps=2",
        "validate.validate_before_train=false",
        "validate.eval.validate_freq=0",
        "data.batch_size=2",
      ],
    });
    expect([result.steps, result.stopReason]).toEqual([2, "completed"]);
    for (const row of result.metrics)
      expect(row).toMatchObject({ "agent/episodes": 16, "agent/prefix_breaks": 0, "rollout/num_trajectories": 16 });
  });
});
