import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { commandHelp } from "../../src/cli/help.js";
import { runReport } from "../../src/cli/report.js";
import { runCli } from "../../src/cli/run.js";
import type { CliIO } from "../../src/cli/io.js";
import { runServe } from "../../src/cli/serve.js";
import { LocalEngine } from "../../src/engine/index.js";
import { pigLatinRun, runNexrl, startServe, tempDir } from "../support/runs.js";
import { UsageError } from "../../src/errors.js";

describe("the command lines of report, sample and serve --model", () => {
  it("parse with their defaults", () => {
    expect(parseCommandLine(["report", "runs/pig"])).toEqual({
      kind: "report",
      runDir: "runs/pig",
      open: false,
      watch: false,
      port: 0,
      intervalMs: 2000,
    });
    expect(parseCommandLine(["report", "runs/pig", "--output", "r.html", "--open"])).toMatchObject({
      output: "r.html",
      open: true,
    });
    expect(parseCommandLine(["report", "r", "-w", "--port", "8123", "--interval", "500"])).toMatchObject({
      watch: true,
      port: 8123,
      intervalMs: 500,
    });
    expect(parseCommandLine(["sample", "runs/pig:4"])).toEqual({
      kind: "sample",
      model: "runs/pig:4",
      chat: false,
      n: 1,
      logprobs: false,
      json: false,
    });
    expect(
      parseCommandLine([
        "sample",
        "r",
        "hi",
        "--chat",
        "-n",
        "3",
        "--temperature",
        "0.7",
        "--max-tokens",
        "20",
        "--logprobs",
        "--json",
        "--seed",
        "5",
      ]),
    ).toEqual({
      kind: "sample",
      model: "r",
      prompt: "hi",
      chat: true,
      n: 3,
      temperature: 0.7,
      maxTokens: 20,
      logprobs: true,
      json: true,
      seed: 5,
    });
    expect(parseCommandLine(["serve", "--model", "a", "--model", "b:3"])).toMatchObject({ models: ["a", "b:3"] });
    expect(parseCommandLine(["report", "--help"])).toEqual({ kind: "help", command: "report" });
    expect(commandHelp("report", "1.0.0")).toMatch(/^Usage:\n {2}nexrl report RUN_DIR /m);
    expect(commandHelp("sample", "1.0.0")).toMatch(/^Usage:\n {2}nexrl sample RUN_DIR\[:STEP\] /m);
    expect(commandHelp("serve", "1.0.0")).toMatch(/--model RUN_DIR\[:STEP\]/);
  });

  it.each([
    [["report"], "nexrl report needs the run folder"],
    [["report", "a", "b"], "nexrl report takes one run folder, got 2: a b"],
    [["report", "a", "--watch", "--output", "x.html"], "--watch serves the report instead of writing a file"],
    [["report", "a", "--port", "70000"], '--port must be an integer from 0 to 65535, got "70000"'],
    [["report", "a", "--bogus"], "nexrl report has no option --bogus\nRun `nexrl report --help` for its options."],
    [["report", "a", "-o", "x.html"], "nexrl report has no option -o; did you mean --output FILE?"],
    [["sample"], "nexrl sample needs a run folder"],
    [["sample", "a", "b", "c"], "at most one PROMPT (quote it), got 3 arguments"],
    [["sample", "a", "-n", "0"], '-n must be an integer from 1 to 64, got "0"'],
    [["sample", "a", "--temperature=-1"], '--temperature must be a number ≥ 0 (0 samples greedily), got "-1"'],
    [["sample", "a", "--max-tokens", "1.5"], '--max-tokens must be an integer from 1 up, got "1.5"'],
    [["sample", "a", "-t", "0"], "nexrl sample has no option -t; did you mean --temperature T?"],
    [["sample", "a", "-m", "8"], "nexrl sample has no option -m; did you mean --max-tokens M?"],
    [["sample", "a", "--temprature", "0"], "nexrl sample has no option --temprature; did you mean --temperature T?"],
  ])("refuse %j", (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(UsageError);
    expect(() => parseCommandLine(argv)).toThrow(message);
  });
});

/** A pig latin run of 4 steps on the tiny preset, with checkpoints at steps 2 and 4. */
async function trainedRun(): Promise<{ dir: string; out: string }> {
  const dir = await tempDir();
  const out = join(dir, "pig");
  await pigLatinRun(out, { steps: 4, saveFreq: 2, validateFreq: 0 });
  return { dir, out };
}

/** The engine with the weights of a checkpoint of `out`. */
async function engineAt(out: string, step: number): Promise<LocalEngine> {
  const engine = LocalEngine.create({ model: "tiny", outputDir: join(out, "scratch") });
  await engine.loadState(join(out, "checkpoints", `step_${String(step).padStart(6, "0")}.nxs`), { optimizer: false });
  return engine;
}

const PROMPT = "English: the dog runs\nPig Latin:";

describe("nexrl sample", () => {
  it("prints the completions of a checkpoint: the engine's own greedy tokens and logprobs", async () => {
    const { out } = await trainedRun();
    const result = await runNexrl(["sample", `${out}:2`, PROMPT, "--json", "--logprobs", "--max-tokens", "12"]);
    expect(result.code, result.stderr).toBe(0);
    // the recipe samples greedily (rollout_worker.temperature 0), and that is the default here
    expect(result.stderr).toContain("nexrl sample: pig:2: local model tiny, weights of step 2");
    expect(result.stderr).toContain("temperature 0, at most 12 tokens");
    const lines = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines).toHaveLength(1);
    const engine = await engineAt(out, 2);
    const own = engine.sample(engine.tokenizer.encode(PROMPT, { addBos: true }), { maxTokens: 12, temperature: 0 });
    expect(lines[0]).toEqual({
      model: "pig:2",
      prompt: PROMPT,
      text: engine.tokenizer.decode(own.sequences[0]!.tokens),
      finish_reason: own.sequences[0]!.stopReason,
      tokens: own.sequences[0]!.tokens,
      logprobs: own.sequences[0]!.logprobs,
    });
  });

  it("reads prompts from standard input, one per line, and prints n completions of each as text", async () => {
    const { out } = await trainedRun();
    const result = await runNexrl(
      ["sample", out, "-n", "2", "--temperature", "1", "--seed", "3", "--max-tokens", "5", "--logprobs"],
      {
        input: "English: a cat\n\nEnglish: a dog\n",
      },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain("pig:4: local model tiny, weights of step 4");
    const text = result.stdout;
    expect(text.match(/^=== prompt \d of 2: .*$/gm)).toEqual([
      '=== prompt 1 of 2: "English: a cat"',
      '=== prompt 2 of 2: "English: a dog"',
    ]);
    const heads = [...text.matchAll(/^--- completion (\d) of 2 \((stop|length), (\d) tokens\)$/gm)];
    expect(heads.map((h) => h[1])).toEqual(["1", "2", "1", "2"]);
    // one logprob row per generated token
    const generated = heads.reduce((n, h) => n + Number(h[3]), 0);
    expect(generated).toBeGreaterThan(0);
    expect(text.match(/^ +-\d+\.\d{4} {2}".*"/gm)).toHaveLength(generated);
  });

  it("fails with the steps there are, and with a usage error for a missing prompt", async () => {
    const { out } = await trainedRun();
    const missing = await runNexrl(["sample", `${out}:3`, "x"]);
    expect([missing.code, missing.stderr]).toEqual([
      3,
      `nexrl: ${out} has no weights at step 3; it has weights at steps 0, 2, 4\n`,
    ]);
    const empty = await runNexrl(["sample", out], { input: "\n" });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain("no prompt: give one after RUN_DIR[:STEP]");
  });
});

describe("nexrl serve --model", () => {
  it("serves a run's checkpoint to an unchanged openai client, with the engine's own logprobs", async () => {
    const { out } = await trainedRun();
    const serve = startServe(["--model", out, "--model", `${out}:2`]);
    try {
      const baseURL = `${await serve.url}/v1`;
      expect(serve.output()).toContain(
        `model "pig:4": tiny weights of step 4 from ${join(out, "checkpoints/step_000004.nxs")}`,
      );
      const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
      const models = [];
      for await (const model of client.models.list()) models.push(model.id);
      expect(models).toEqual(["tiny", "small", "medium", "large", "pig:4", "pig:2"]);

      const completion = await client.completions.create({
        model: "pig:4",
        prompt: PROMPT,
        max_tokens: 10,
        temperature: 1,
        seed: 7,
        logprobs: 1,
        // vLLM's extension, passed through the client unchanged: the ids of prompt and completion
        return_token_ids: true,
      } as OpenAI.CompletionCreateParamsNonStreaming);
      const choice = completion.choices[0]! as (typeof completion.choices)[0] & { token_ids: number[] };
      const prompt = (completion.choices[0] as unknown as { prompt_token_ids: number[] }).prompt_token_ids;
      const served = choice.logprobs!.token_logprobs!;
      expect(served).toHaveLength(choice.token_ids.length);
      const engine = await engineAt(out, 4);
      const own = engine.computeLogprobs([...prompt, ...choice.token_ids]).slice(prompt.length);
      for (const [i, lp] of served.entries()) expect(Math.abs(lp - own[i]!), `token ${i}`).toBeLessThan(1e-4);
      // the weights of step 2 are another model: its logprobs of the same tokens differ
      const earlier = (await engineAt(out, 2)).computeLogprobs([...prompt, ...choice.token_ids]).slice(prompt.length);
      expect(earlier.some((lp, i) => Math.abs(lp! - own[i]!) > 1e-3)).toBe(true);

      const chat = await client.chat.completions.create({
        model: "pig:2",
        messages: [{ role: "user", content: "the dog runs" }],
        max_tokens: 6,
      });
      expect(chat.choices[0]!.message.role).toBe("assistant");
      expect(chat.choices[0]!.finish_reason).toMatch(/^(stop|length)$/);
      expect(chat.model).toBe("pig:2");
    } finally {
      serve.child.kill("SIGINT");
      await serve.exited;
    }
  });

  it("refuses a protocol without the OpenAI endpoints, and a remote run", async () => {
    const { out } = await trainedRun();
    const cli = bufferIO(dirname(out));
    expect(await runCli(["serve", "--port", "0", "-p", "tinker", "--model", out], cli.io)).toBe(2);
    expect(cli.err()).toBe(
      "nexrl: --model serves on the OpenAI-compatible endpoints; use --protocol openai or all, not tinker\n",
    );
    const twice = bufferIO(dirname(out));
    expect(await runCli(["serve", "--port", "0", "--model", out, "--model", `${out}:4`], twice.io)).toBe(2);
    expect(twice.err()).toContain('two --model arguments are both named "pig:4"');
    const remote = join(dirname(out), "remote");
    await mkdir(remote);
    await writeFile(join(remote, "config.resolved.yaml"), "service: {train_service: {backend: weaver, model: m}}\n");
    const refused = bufferIO(dirname(out));
    expect(await runCli(["serve", "--port", "0", "--model", "remote"], refused.io)).toBe(3);
    expect(refused.err()).toContain("trained on weaver: its weights are on that service, not on this machine");
  });
});

describe("nexrl report", () => {
  it.skipIf(process.platform !== "linux")(
    "--open hands the file to xdg-open, or prints where it is when there is no opener",
    async () => {
      const { dir, out } = await trainedRun();
      const bin = join(dir, "bin");
      await mkdir(bin);
      await writeFile(join(bin, "xdg-open"), `#!/bin/sh\necho "$1" > "${join(dir, "opened.txt")}"\n`);
      await chmod(join(bin, "xdg-open"), 0o755);
      const opened = bufferIO(dir);
      opened.io.env = { PATH: bin };
      expect(await runCli(["report", out, "--open"], opened.io)).toBe(0);
      expect(opened.out()).toBe(`${join(out, "report.html")}\n`);
      await expect
        .poll(() => readFile(join(dir, "opened.txt"), "utf8").catch(() => ""))
        .toBe(`${join(out, "report.html")}\n`);
      const none = bufferIO(dir);
      none.io.env = { PATH: join(dir, "nowhere") };
      expect(await runCli(["report", out, "--open"], none.io)).toBe(0);
      expect(none.err()).toBe(
        `nexrl report: no browser opener found (xdg-open); open ${join(out, "report.html")} yourself\n`,
      );
    },
  );

  it("names what is wrong with a folder that is not a run", async () => {
    const dir = await tempDir();
    const result = await runNexrl(["report", dir]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain(
      `${dir} is not a run folder: it holds no config.resolved.yaml, run.json nor metrics.jsonl`,
    );
  });
});

/** A CliIO that collects what is printed, with `stdin` lines when given. */
function bufferIO(cwd: string, stdin?: { lines: string[]; isTTY: boolean }) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIO = {
    stdout: { write: (t: string) => out.push(t) },
    stderr: { write: (t: string) => err.push(t) },
    env: {},
    cwd,
    version: "0.0.0-test",
    ...(stdin && {
      stdin: Object.assign(
        (async function* () {
          yield* stdin.lines;
        })(),
        { isTTY: stdin.isTTY },
      ),
    }),
  };
  return { io, out: () => out.join(""), err: () => err.join("") };
}

describe("report, sample and serve --model in this process", () => {
  it("sample reads a terminal's lines, report writes beside the run or where --output says", async () => {
    const { dir, out } = await trainedRun();
    const cli = bufferIO(dir, { lines: ["English: a cat\nEng", "lish: a dog\n"], isTTY: true });
    expect(await runCli(["sample", "pig", "--max-tokens", "3", "--json"], cli.io)).toBe(0);
    expect(cli.err()).toContain("reading prompts from standard input, one per line (Ctrl-D ends)");
    expect(cli.err()).toContain("weights of step 4 (pig/checkpoints/step_000004.nxs)");
    expect(
      cli
        .out()
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).prompt),
    ).toEqual(["English: a cat", "English: a dog"]);
    const chat = bufferIO(dir);
    expect(
      await runCli(
        ["sample", out, "hello", "--chat", "--max-tokens", "4", "--seed", "1", "--temperature", "1"],
        chat.io,
      ),
    ).toBe(0);
    expect(chat.out()).toMatch(/^=== prompt: "hello"\n--- completion \((stop|length), \d tokens\)\n/);

    const report = bufferIO(dir);
    expect(await runCli(["report", "pig"], report.io)).toBe(0);
    expect(report.out()).toBe(`${join(out, "report.html")}\n`);
    expect(await runCli(["report", "pig", "--output", "elsewhere.html"], report.io)).toBe(0);
    expect(await readFile(join(dir, "elsewhere.html"), "utf8")).toContain("<title>pig — nexrl run report</title>");
  });

  it("report --watch serves until stopped; serve --model lists the run's model until stopped", async () => {
    const { dir, out } = await trainedRun();
    const watch = bufferIO(dir);
    let stopWatch!: () => void;
    const watching = runReport(
      { kind: "report", runDir: out, open: false, watch: true, port: 0, intervalMs: 1000 },
      watch.io,
      new Promise<void>((resolve) => (stopWatch = resolve)),
    );
    // Start-up waits for the machine: on a loaded one it takes more than expect.poll's default second.
    await expect.poll(() => watch.out(), { timeout: 30_000 }).toMatch(/serving http:\/\/127\.0\.0\.1:\d+\//);
    const url = /http:\/\/127\.0\.0\.1:\d+\//.exec(watch.out())![0];
    const first = await fetch(`${url}data.json`);
    const etag = first.headers.get("etag")!;
    expect(((await first.json()) as { title: string }).title).toBe("pig");
    expect((await fetch(`${url}data.json`, { headers: { "if-none-match": etag } })).status).toBe(304);
    expect(await (await fetch(url)).text()).toContain(`"etag":${JSON.stringify(etag)}`);
    expect((await fetch(`${url}nothing`)).status).toBe(404);
    expect((await fetch(url, { method: "POST" })).status).toBe(405);
    stopWatch();
    expect(await watching).toBe(0);

    const serve = bufferIO(dir);
    let stopServe!: () => void;
    const serving = runServe(
      { kind: "serve", protocol: "openai", host: "127.0.0.1", port: 0, seed: 0, models: [`${out}:2`] },
      serve.io,
      new Promise<void>((resolve) => (stopServe = resolve)),
    );
    // The run's model loads in an engine host thread first.
    await expect.poll(() => serve.out(), { timeout: 30_000 }).toContain("stop with Ctrl-C");
    const base = /http:\/\/127\.0\.0\.1:\d+/.exec(serve.out())![0];
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toEqual(["tiny", "small", "medium", "large", "pig:2"]);
    stopServe();
    expect(await serving).toBe(0);
  });
});
