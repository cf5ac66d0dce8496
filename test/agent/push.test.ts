import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { AgentGateway } from "../../src/agent/index.js";
import { runRecipe } from "../../src/index.js";
import { gateway, task, tempDir, tinyInference, writeFiles } from "../support/agent.js";

/** POSTs JSON to the gateway and parses the answer. */
/** The header of a JSON body (fetch sends text/plain by default, which the gateway refuses). */
const JSON_BODY = { "content-type": "application/json" };

async function post(base: string, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(base + path, {
    method: "POST",
    headers: JSON_BODY,
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

const RULES = { vocabSize: 259, maxSequenceLength: 16, needsReward: true };
const PYTHON_AGENT = fileURLToPath(new URL("../../examples/python_agent/agent.py", import.meta.url));
const hasPython = spawnSync("python3", ["--version"]).status === 0;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("external agents: POST /tasks/claim and POST /trajectories", () => {
  it("hands out an offered task with its rollout's base URL and completes the rollout with a valid push", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const pushed = g.offerTask(
      session,
      task({ question: "q", answer: "a" }, { prompt: "q" }),
      RULES,
      new AbortController().signal,
    );
    const claim = await post(g.url, "/tasks/claim", { wait_seconds: 1 });
    expect(claim).toEqual({
      status: 200,
      body: {
        rollout_id: session.id,
        base_url: session.baseURL,
        model: "tiny",
        task: { data: { question: "q", answer: "a" }, prompt: "q", index: 0, group_id: "g0", run_id: 0, is_val: false },
      },
    });
    const trajectory = { tokens: [256, 104, 105], loss_mask: [0, 1, 1], logprobs: [0, -1.5, -0.25] };
    const ok = await post(g.url, "/trajectories", {
      rollout_id: session.id,
      reward: 0.5,
      final_answer: "hi",
      trajectories: [trajectory],
      extra_info: { by: "test" },
    });
    expect(ok).toEqual({
      status: 200,
      body: { accepted: true, rollout_id: session.id, trajectories: 1, recorded_calls: 0 },
    });
    expect(await pushed).toEqual({
      reward: 0.5,
      finalAnswer: "hi",
      trajectories: [{ tokens: [256, 104, 105], lossMask: [0, 1, 1], logprobs: [0, -1.5, -0.25], reward: 0.5 }],
      extraInfo: { by: "test" },
    });
    const again = await post(g.url, "/trajectories", { rollout_id: session.id, reward: 1 });
    expect([again.status, again.body.error.code]).toEqual([404, "rollout_not_found"]);
  });

  it("explains every invalid push: field, lengths, vocabulary, length limit, mask, reward, unknown keys", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    void g.offerTask(session, task({ question: "q" }), RULES, new AbortController().signal);
    await post(g.url, "/tasks/claim", {});
    const id = session.id;
    const t = (fields: Record<string, unknown>) => ({
      rollout_id: id,
      reward: 1,
      trajectories: [{ tokens: [1, 2, 3], loss_mask: [0, 1, 1], ...fields }],
    });
    const cases: Array<[unknown, string | null, RegExp]> = [
      [{ reward: 1 }, "rollout_id", /^rollout_id: /],
      [
        t({ loss_mask: [0, 1] }),
        "trajectories[0].loss_mask",
        /has 2 values but tokens has 3; give one 0 or 1 per token/,
      ],
      [t({ loss_mask: [0, 2, 1] }), "trajectories[0].loss_mask[1]", /loss_mask\[1\]/],
      [
        t({ logprobs: [0] }),
        "trajectories[0].logprobs",
        /has 1 values but tokens has 3; give one per token \(0 on prompt tokens\)/,
      ],
      [t({ tokens: [1, 300, 2] }), "trajectories[0].tokens", /\[1\] is 300, outside the model's vocabulary 0\.\.258/],
      [
        t({ tokens: Array.from({ length: 17 }, () => 1), loss_mask: Array.from({ length: 17 }, () => 1) }),
        "trajectories[0].tokens",
        /has 17 tokens, more than rollout_worker\.max_sequence_length \(16\)/,
      ],
      [t({ loss_mask: [0, 0, 0] }), "trajectories[0].loss_mask", /has no 1: mark the sampled tokens to train on/],
      [
        { rollout_id: id, trajectories: [{ tokens: [1], loss_mask: [1] }] },
        "trajectories[0].reward",
        /is missing and the push has no reward/,
      ],
      [{ rollout_id: id }, "reward", /is missing; give the episode's reward \(no evaluator is configured/],
      [{ rollout_id: id, reward: 1, score: 3 }, null, /Unrecognized key: "score"/],
      [t({ logprobs: [0, null, 1] }), "trajectories[0].logprobs[1]", /logprobs\[1\]/],
    ];
    for (const [body, param, message] of cases) {
      const answer = await post(g.url, "/trajectories", body);
      expect([answer.status, answer.body.error.param], JSON.stringify(body)).toEqual([400, param]);
      expect(answer.body.error.message).toMatch(message);
    }
    const unknown = await post(g.url, "/trajectories", { rollout_id: "r-unknown", reward: 1 });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, "rollout_not_found"]);
    expect(unknown.body.error.message).toMatch(/claim tasks with POST \/tasks\/claim/);
  });

  it("answers 204 when no task comes, 409 for a task not claimed yet, and 503 to waiting claims when the gateway closes", async () => {
    const g = await AgentGateway.start({ log: () => undefined });
    const inference = await tinyInference();
    expect(
      (
        await fetch(`${g.url}/tasks/claim`, {
          method: "POST",
          headers: JSON_BODY,
          body: JSON.stringify({ wait_seconds: 0 }),
        })
      ).status,
    ).toBe(204);
    const bad = await post(g.url, "/tasks/claim", { wait_seconds: -1 });
    expect([bad.status, bad.body.error.param]).toEqual([400, "wait_seconds"]);
    const first = g.openRollout(inference);
    const second = g.openRollout(inference);
    void g.offerTask(first, task({ q: 1 }), RULES, new AbortController().signal);
    void g.offerTask(second, task({ q: 2 }), RULES, new AbortController().signal);
    expect((await post(g.url, "/tasks/claim", {})).body.rollout_id).toBe(first.id);
    const early = await post(g.url, "/trajectories", { rollout_id: second.id, reward: 1 });
    expect([early.status, early.body.error.code]).toEqual([409, "rollout_not_claimed"]);
    expect((await post(g.url, "/tasks/claim", {})).body.rollout_id).toBe(second.id);
    const waiting = post(g.url, "/tasks/claim", { wait_seconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await g.close();
    const closed = await waiting;
    expect([closed.status, closed.body.error.code]).toEqual([503, "gateway_closed"]);
  });

  it("withdraws an offer whose rollout ends first", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const controller = new AbortController();
    const offered = g.offerTask(session, task({}), RULES, controller.signal);
    controller.abort(new Error("timed out"));
    await expect(offered).rejects.toThrow("timed out");
    expect(
      (
        await fetch(`${g.url}/tasks/claim`, {
          method: "POST",
          headers: JSON_BODY,
          body: JSON.stringify({ wait_seconds: 0 }),
        })
      ).status,
    ).toBe(204);
  });

  it.skipIf(!hasPython)(
    "the example Python agent (standard library only) claims tasks, chats through the gateway and pushes episodes into training",
    async () => {
      const dir = await tempDir();
      const port = await freePort();
      const rows = ["fox", "owl", "cat", "elk"]
        .map((word) => JSON.stringify({ question: `code of ${word}?`, answer: String(word.length * 111) }))
        .join("\n");
      const recipe = [
        "data: {data_files: [train.jsonl], prompt_key: question, batch_size: 2, rollout_repeat_n: 2, max_prompt_length: 32, seed: 3}",
        `rollout_worker: {type: agent, num_workers: 2, max_response_length: 12, max_sequence_length: 128, agent: {external: true, max_turns: 3, timeout_seconds: 60, gateway: {port: ${port}}}}`,
        "trajectory_pool: {batch_size: 4}",
        "trainer: {type: remote_api_grpo, total_train_steps: 2}",
        "service: {train_service: {backend: local, model: tiny}}",
        "",
      ].join("\n");
      await writeFiles(dir, {
        "train.jsonl": `${rows}\n`,
        "recipe.yaml": recipe,
        "codes.json": JSON.stringify({ fox: "333" }),
      });
      const child = spawn(
        "python3",
        [
          PYTHON_AGENT,
          "--gateway",
          `http://127.0.0.1:${port}`,
          "--codes",
          join(dir, "codes.json"),
          "--idle",
          "30",
          "--max-tokens",
          "12",
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
      try {
        const result = await runRecipe(join(dir, "recipe.yaml"), { outputDir: join(dir, "run"), env: {}, cwd: dir });
        expect([result.steps, result.stopReason]).toEqual([2, "completed"]);
        for (const row of result.metrics) {
          expect(row).toMatchObject({ "agent/episodes": 4, "agent/prefix_breaks": 0 });
          expect(row["rollout/num_trajectories"]).toBeGreaterThanOrEqual(4);
        }
        expect(await exited).toBe(0);
        expect(stderr).toBe("");
        expect(stdout).toMatch(/pushed 8 episodes\n$/);
        expect(stdout.match(/^episode \d+: reward [01]\.0, [1-3] trajectories$/gm)).toHaveLength(8);
      } finally {
        child.kill();
      }
    },
    60_000,
  );
});
