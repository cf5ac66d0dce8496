import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import type { Tokenizer } from "../../src/wire/tokenizer.js";
import { HfTokenizer } from "../../src/inference/tokenizers/hf-tokenizer.js";
import { SamplerInferenceClient } from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { RolloutRunner } from "../../src/rollouts/runner.js";
import { DataLoader } from "../../src/data/data-loader.js";
import { SftRolloutWorker, renderSftExample } from "../../src/workers/sft.js";
import { readSftRow, type SftTrainOn } from "../../src/workers/sft-rows.js";
import { VALIDATION_TARGET } from "../../src/rollouts/validation-nll.js";
import { workerSettings } from "../../src/recipe/settings.js";
import { task, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { qwen3Folder } from "../support/qwen.js";

const bytes = new ByteTokenizer();
/** The byte tokenizer's rendering of one message: `<|role|>\n`, the content, EOS. */
const turn = (role: string, content: string): number[] => [...bytes.encode(`<|${role}|>\n${content}`), bytes.eosId];
/** The header of a turn (the part before its content). */
const header = (role: string): number[] => bytes.encode(`<|${role}|>\n`);

function render(
  row: Record<string, unknown>,
  trainOn: SftTrainOn = "all_assistant_messages",
  tokenizer: Tokenizer = bytes,
) {
  const promptKey = "messages" in row ? "messages" : "prompt";
  return renderSftExample(tokenizer, readSftRow(row, promptKey, trainOn, "row 3"), "row 3");
}

/** The trained tokens of a rendering, as text per trained span. */
function trainedSpans(tokens: number[], mask: number[], tokenizer: { decode(ids: number[]): string }): string[] {
  const spans: string[] = [];
  let current: number[] | undefined;
  tokens.forEach((t, i) => {
    if (mask[i] === 1) (current ??= []).push(t);
    else if (current) {
      spans.push(tokenizer.decode(current));
      current = undefined;
    }
  });
  if (current) spans.push(tokenizer.decode(current));
  return spans;
}

const conversation = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "hi" },
  { role: "assistant", content: "hello" },
  { role: "user", content: "bye" },
  { role: "assistant", content: "ciao" },
];

describe("sft rows rendered with the chat template", () => {
  it("a messages row trains every assistant message through its end-of-turn token, by default", () => {
    const { tokens, lossMask } = render({ messages: conversation });
    const expected = [
      bytes.bosId,
      ...turn("system", "Be brief."),
      ...turn("user", "hi"),
      ...turn("assistant", "hello"),
      ...turn("user", "bye"),
      ...turn("assistant", "ciao"),
    ];
    expect(tokens).toEqual(expected);
    const mask = expected.map(() => 0);
    const firstStart = 1 + turn("system", "Be brief.").length + turn("user", "hi").length + header("assistant").length;
    mask.fill(1, firstStart, firstStart + 5 + 1); // "hello" + EOS
    const lastStart = expected.length - 5; // "ciao" + EOS
    mask.fill(1, lastStart);
    expect(lossMask).toEqual(mask);
    expect(lossMask.reduce((a, b) => a + b, 0)).toBe(11);
  });

  it("last_assistant_message trains only the last answer; a weight overrides the choice either way", () => {
    const last = render({ messages: conversation }, "last_assistant_message");
    expect(trainedSpans(last.tokens, last.lossMask, bytes)).toEqual(["ciao"]);
    expect(last.lossMask.at(-1)).toBe(1); // the EOS that ends the turn
    const weighted = conversation.map((m, i) => (i === 2 ? { ...m, weight: 1 } : i === 4 ? { ...m, weight: 0 } : m));
    const w = render({ messages: weighted }, "last_assistant_message");
    expect(trainedSpans(w.tokens, w.lossMask, bytes)).toEqual(["hello"]);
    const none = render({ messages: conversation.map((m, i) => (i === 2 ? { ...m, weight: 0 } : m)) });
    expect(trainedSpans(none.tokens, none.lossMask, bytes)).toEqual(["ciao"]);
  });

  it("a text prompt and completion: the prompt with BOS as completion() encodes it, the completion and EOS trained", async () => {
    const { tokens, lossMask } = render({ prompt: "2+2=", completion: "4" });
    expect(tokens).toEqual([bytes.bosId, ...bytes.encode("2+2="), ...bytes.encode("4"), bytes.eosId]);
    expect(lossMask).toEqual([0, 0, 0, 0, 0, 1, 1]);
    // One BOS rule: the trained prompt is what completion() sends for the same text.
    const service = new LocalTrainingService({ outputDir: await tempDir(), seed: 0 });
    const inference = new SamplerInferenceClient({
      tokenizer: bytes,
      samplingClient: await service.createSamplingClient("tiny"),
    });
    const sampled = await inference.completion("2+2=", { maxTokens: 1, temperature: 0 });
    expect(sampled.promptTokens).toEqual(tokens.slice(0, 5));
  });

  it("chat prompt with a completion trains the completion only", () => {
    const text = render({ prompt: [{ role: "user", content: "hi" }], completion: "yo" });
    expect(trainedSpans(text.tokens, text.lossMask, bytes)).toEqual(["yo"]);
    const list = render({
      prompt: [{ role: "user", content: "hi" }],
      completion: [
        { role: "assistant", content: "one" },
        { role: "user", content: "more" },
        { role: "assistant", content: "two", weight: 0 },
      ],
    });
    expect(trainedSpans(list.tokens, list.lossMask, bytes)).toEqual(["one"]);
  });

  it("tool calls are written into the text for a template that ignores tool_calls, as the agent gateway writes them", () => {
    const { tokens, lossMask } = render({
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: "rain" },
        { role: "assistant", content: "It rains." },
      ],
    });
    expect(trainedSpans(tokens, lossMask, bytes)).toEqual([
      '<tool_call>{"name":"weather","arguments":{"city":"Oslo"}}</tool_call>',
      "It rains.",
    ]);
  });

  it("rows that cannot be trained are refused, naming the row and the field", () => {
    const refused = (row: Record<string, unknown>, trainOn: SftTrainOn = "all_assistant_messages") =>
      expect(() => render(row, trainOn));
    refused({ messages: [{ role: "user", content: "hi" }] }).toThrow(/^row 3 has no assistant message to train on/);
    refused({ messages: [{ role: "robot", content: "hi" }] }).toThrow(
      /^row 3: messages\[0\]\.role must be one of system, developer, user, assistant, tool, got "robot"/,
    );
    refused({
      messages: [
        { role: "user", content: "hi", weight: 1 },
        { role: "assistant", content: "a" },
      ],
    }).toThrow(/^row 3: messages\[0\]\.weight is set on a user message; only assistant messages are trained/);
    refused({
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "a", weight: 0.5 },
      ],
    }).toThrow(/^row 3: messages\[1\]\.weight must be 0 or 1, got 0.5/);
    refused({
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "a", weight: 0 },
      ],
    }).toThrow(/^row 3 has no assistant message to train on \(each has weight 0/);
    refused({
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: 4 },
      ],
    }).toThrow(/^row 3: messages\[1\]\.content must be text \(or null when the message has tool_calls\), got 4/);
    refused({
      messages: [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ type: "function", function: { name: "f", arguments: {} } }],
        },
      ],
    }).toThrow(/^row 3: messages\[1\]\.tool_calls\[0\]\.function\.arguments must be the arguments as a JSON text/);
    refused({ prompt: "2+2=" }).toThrow(/^row 3: its prompt "prompt" is text, so it needs a text field "completion"/);
    refused({
      prompt: [
        { role: "user", content: "q" },
        { role: "assistant", content: "a", weight: 1 },
        { role: "user", content: "q2" },
      ],
      completion: "b",
    }).toThrow(/^row 3: prompt\[1\]\.weight is set, but the prompt of a prompt\/completion row is never trained/);
    refused({
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: "a" },
      ],
      tools: [{ name: "f" }],
    }).toThrow(/^row 3: tools\[0\] must look like \{"type": "function"/);
    // The byte tokenizer's template does not describe tools: they would vanish without a word.
    refused({
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: "a" },
      ],
      tools: [{ type: "function", function: { name: "f" } }],
    }).toThrow(/^row 3: the chat template of this model does not describe "tools"/);
  });
});

describe("the data loader and OpenAI's tool-call messages", () => {
  it('accepts an assistant message that only calls tools (content null) and hands it out with content ""', async () => {
    const dir = await tempDir();
    const call = { id: "c1", type: "function", function: { name: "f", arguments: "{}" } };
    const messages = [
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "done" },
      { role: "assistant", content: "ok" },
    ];
    const file = await writeJsonl(`${dir}/rows.jsonl`, [{ messages }]);
    const loader = await DataLoader.fromFiles([file], { promptKey: "messages", batchSize: 1, seed: 0 });
    const [task] = loader.nextBatch()![0]!.tasks;
    expect(task!.prompt).toEqual([messages[0], { ...messages[1], content: "" }, messages[2], messages[3]]);
    await writeJsonl(file, [{ messages: [{ role: "assistant", content: null }] }]);
    await expect(DataLoader.fromFiles([file], { promptKey: "messages", batchSize: 1, seed: 0 })).rejects.toThrow(
      /must be text or a list of \{role, content\} chat messages/,
    );
  });
});

describe("sft rows through a real chat template (Qwen3)", () => {
  let qwen: HfTokenizer;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const folder = await qwen3Folder();
    cleanup = folder.cleanup;
    qwen = await HfTokenizer.fromFolder(folder.dir);
  });
  afterAll(() => cleanup());

  it("trains each assistant message through <|im_end|>, not the newline after it; tools and tool calls are rendered", () => {
    const tools = [
      {
        type: "function",
        function: { name: "weather", description: "Weather of a city", parameters: { type: "object" } },
      },
    ];
    const row = {
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: "",
          tool_calls: [{ id: "c1", type: "function", function: { name: "weather", arguments: '{"city": "Oslo"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: "rain" },
        { role: "assistant", content: "It rains in Oslo." },
      ],
      tools,
    };
    const { tokens, lossMask } = render(row, "all_assistant_messages", qwen);
    const imEnd = qwen.encode("<|im_end|>")[0]!;
    expect(imEnd).toBe(qwen.eosId);
    const text = qwen.renderChatTemplate(row.messages as never, { tools: tools as never });
    expect(text).toContain('"name": "weather"');
    expect(tokens).toEqual(qwen.encode(text));
    const spans: number[][] = [];
    tokens.forEach((t, i) => {
      if (lossMask[i] === 1 && (i === 0 || lossMask[i - 1] === 0)) spans.push([]);
      if (lossMask[i] === 1) spans.at(-1)!.push(t);
    });
    expect(spans).toHaveLength(2);
    for (const span of spans) expect(span.at(-1)).toBe(imEnd);
    // Decoding skips special tokens: the trained text is the answer as the template writes it.
    expect(qwen.decode(spans[0]!)).toContain(
      '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    );
    expect(qwen.decode(spans[1]!)).toContain("It rains in Oslo.");
    expect(qwen.decode(tokens.slice(tokens.lastIndexOf(imEnd) + 1))).toBe("\n");
    expect(lossMask.at(-1)).toBe(0);
  });
});

describe("the sft worker in a rollout", () => {
  it("trains rows without sampling and answers validation rows greedily, with the row as its validation target", async () => {
    const dir = await tempDir();
    await writeJsonl(`${dir}/train.jsonl`, [{ messages: conversation }]);
    const recipe = await writeRecipe(
      dir,
      `data: {data_files: [train.jsonl], prompt_key: messages, max_prompt_length: 40}\nrollout_worker: {type: sft, max_sequence_length: 120, max_response_length: 6, sft: {train_on: last_assistant_message}}\ntrainer: {type: remote_api_cross_entropy, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n`,
    );
    expect(recipe.config.rollout_worker.need_llm_inference).toBe(false);
    const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
    const inference = new SamplerInferenceClient({
      tokenizer: bytes,
      samplingClient: await service.createSamplingClient("tiny"),
    });
    const runner = new RolloutRunner({
      createWorker: (slot) =>
        new SftRolloutWorker({ name: `w-${slot}`, settings: workerSettings(recipe.config), tokenizer: bytes }),
      numWorkers: 1,
      timeoutMs: 0,
      policy: { mode: "fail_fast" },
      inference,
      sampling: { temperature: 1, maxTokens: 6 },
      maxSequenceLength: 120,
      currentVersion: () => 0,
    });
    const expected = render({ messages: conversation }, "last_assistant_message");
    const [train] = (await runner.run(task({ data: { messages: conversation }, prompt: conversation }))).trajectories;
    expect(train!.tokens).toEqual(expected.tokens);
    expect(train!.lossMask).toEqual(expected.lossMask);
    expect(train!.reward).toBe(1);
    const [val] = (await runner.run(task({ data: { messages: conversation }, prompt: conversation, isVal: true })))
      .trajectories;
    // The sample continues the conversation up to the last answer, with the assistant's turn opened.
    expect(val!.tokens.slice(0, expected.lastStart)).toEqual(expected.tokens.slice(0, expected.lastStart));
    expect(val!.lossMask.slice(expected.lastStart).every((m) => m === 1)).toBe(true);
    expect(val!.extraFields.answer).toBe("ciao");
    expect(typeof val!.extraFields.response).toBe("string");
    expect(val!.reward).toBe(val!.extraFields.response === "ciao" ? 1 : 0);
    expect(val!.extraFields[VALIDATION_TARGET]).toEqual({ tokens: expected.tokens, loss_mask: expected.lossMask });
  });
});
