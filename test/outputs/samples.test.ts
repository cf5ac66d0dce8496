import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { sampleRows } from "../../src/outputs/samples.js";
import { Trajectory } from "../../src/contracts/trajectory.js";

const tokenizer = new ByteTokenizer();
/** BOS, "ab" as prompt, then "xé" and EOS as the response (é is two bytes). */
const prompt = [tokenizer.bosId, ...tokenizer.encode("ab")];
const response = [...tokenizer.encode("xé"), tokenizer.eosId];
const tokens = [...prompt, ...response];
const lossMask = [...prompt.map(() => 0), ...response.map(() => 1)];

describe("samples.jsonl rows", () => {
  it("keep their fields and add the response token by token: ids, text, mask, per-token advantages, logprobs", () => {
    const t = new Trajectory({
      tokens,
      lossMask,
      reward: 0.5,
      advantage: -0.25,
      logprobs: [0, 0, 0, -0.123456, -1.5, -2.000049, -0.1],
      groupId: "g",
      runId: 1,
      policyVersion: 3,
    });
    const [row] = sampleRows(4, [t], tokenizer, 1);
    expect(row).toEqual({
      step: 4,
      group: "g",
      run: 1,
      reward: 0.5,
      advantage: -0.25,
      policy_version: 3,
      prompt: "ab",
      response: "xé",
      response_tokens: {
        ids: response,
        // each byte of é decodes alone to U+FFFD; EOS is a special token and decodes to nothing
        text: ["x", "\uFFFD", "\uFFFD", ""],
        loss_mask: [1, 1, 1, 1],
        advantages: [-0.25, -0.25, -0.25, -0.25],
        logprobs: [-0.1235, -1.5, -2, -0.1],
      },
      trained: true,
    });
  });

  it("show the typed lossWeight, preference, score and counters in extra_fields under the keys rows always had", () => {
    const t = new Trajectory({
      tokens,
      lossMask,
      reward: 1,
      lossWeight: 0.5,
      preference: "chosen",
      score: { f1: 0.25, exact: false },
      counters: { "agent/episodes": 1 },
      extraFields: { answer: "42" },
    });
    expect(sampleRows(1, [t], tokenizer, 1)[0]!.extra_fields).toEqual({
      loss_weight: 0.5,
      preference: "chosen",
      score: { f1: 0.25, exact: false },
      counters: { "agent/episodes": 1 },
      answer: "42",
    });
    expect(
      sampleRows(1, [new Trajectory({ tokens, lossMask, reward: 1 })], tokenizer, 1)[0]!.extra_fields,
    ).toBeUndefined();
  });

  it("show the diagnostics that have a kind and a message, always pick rollouts that have some, and split a row with no trained token at its end", () => {
    const plain = (extraFields: Record<string, unknown>) =>
      new Trajectory({ tokens, lossMask, reward: 0, extraFields });
    const good = { kind: "prefix_break", message: "turn 2 does not continue turn 1", turn: 2 };
    const batch = [
      plain({}),
      plain({}),
      plain({ diagnostics: [good, { kind: 3 }, "loose words"] }),
      plain({ diagnostics: "not a list" }),
      plain({ diagnostics: [{ message: "no kind" }] }),
    ];
    // One row asked for: the rollout with a diagnostic comes along beside it.
    const rows = sampleRows(1, batch, tokenizer, 1);
    expect(rows.map((r) => r.diagnostics)).toEqual([undefined, [good]]);
    const untrained = new Trajectory({ tokens, lossMask: tokens.map(() => 0), reward: 0 });
    const [row] = sampleRows(1, [untrained], tokenizer, 1);
    expect([row!.prompt, row!.response, row!.response_tokens.ids]).toEqual(["abxé", "", []]);
  });

  it("spread over the whole step, trained or not, and carry the worker's other extraFields", () => {
    const batch = Array.from(
      { length: 8 },
      (_, i) => new Trajectory({ tokens, lossMask, reward: i, extraFields: { index: i, note: `row ${i}` } }),
    );
    // The trainer kept the odd ones.
    const rows = sampleRows(
      2,
      batch.filter((_, i) => i % 2 === 1),
      tokenizer,
      4,
      batch,
    );
    expect(rows.map((r) => [r.reward, r.trained, r.extra_fields])).toEqual([
      [0, false, { index: 0, note: "row 0" }],
      [2, false, { index: 2, note: "row 2" }],
      [4, false, { index: 4, note: "row 4" }],
      [6, false, { index: 6, note: "row 6" }],
    ]);
    expect(
      sampleRows(
        2,
        batch.filter((_, i) => i < 4),
        tokenizer,
        2,
        batch,
      ).map((r) => [r.reward, r.trained]),
    ).toEqual([
      [0, true],
      [4, false],
    ]);
    // Trajectories of the trainer's own making: the rows come from them, all trained.
    const copies = batch.slice(0, 2).map((t) => new Trajectory({ tokens: t.tokens, lossMask, reward: 10 + t.reward }));
    expect(sampleRows(2, copies, tokenizer, 4, batch).map((r) => [r.reward, r.trained])).toEqual([
      [10, true],
      [11, true],
    ]);
    // A value JSON cannot hold is described, not written.
    const odd = new Trajectory({ tokens, lossMask, reward: 0, extraFields: { big: 1n, calls: [], ok: [1] } });
    expect(sampleRows(1, [odd], tokenizer, 1)[0]!.extra_fields).toEqual({
      big: "<not JSON: Do not know how to serialize a BigInt>",
      ok: [1],
    });
  });

  it("write per-token advantages as given (0 off the mask), omit what the trajectory lacks, and carry an agent's calls", () => {
    const mask = [...lossMask.slice(0, -1), 0];
    const calls = [
      { turn: 1, endpoint: "chat.completions", prompt_tokens: 3, completion_tokens: 3, tool_calls: ["add"] },
    ];
    const withAdvantages = new Trajectory({
      tokens,
      lossMask: mask,
      reward: 1,
      advantages: [0, 0, 0, 0.5, 1, -1, 0],
      extraFields: { calls },
    });
    const plain = new Trajectory({ tokens, lossMask, reward: 1 });
    const [a, b] = sampleRows(1, [withAdvantages, plain], tokenizer, 2);
    expect(a!.advantage).toBeCloseTo(1 / 6);
    expect(a!.response_tokens).toEqual({
      ids: response,
      text: ["x", "\uFFFD", "\uFFFD", ""],
      loss_mask: [1, 1, 1, 0],
      advantages: [0.5, 1, -1, 0],
    });
    expect(a!.calls).toEqual(calls);
    expect(b!.response_tokens).toEqual({ ids: response, text: ["x", "\uFFFD", "\uFFFD", ""], loss_mask: [1, 1, 1, 1] });
    expect(b).not.toHaveProperty("calls");
    expect(b!.advantage).toBeNull();
  });
});
