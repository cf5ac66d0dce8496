import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../../src/cli/run.js";
import { loraTargets } from "../../src/engine/lora.js";
import { tensorViews } from "../../src/engine/params.js";
import { decodeStateFile } from "../../src/engine/state-file.js";
import { writeHuggingFace } from "../../src/export/hugging-face.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { readRunWeights } from "../../src/run-folder/index.js";
import { readRunFolder } from "../../src/run-folder/read.js";
import { startServer } from "../../src/server/index.js";
import { additionRows, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

const KEY = "tml-peft-export-test-key";

/** A safetensors reader written for this test (not the exporter's): name → { shape, F32 values }. */
function readSafetensors(bytes: Buffer): Map<string, { shape: number[]; data: Float32Array }> {
  const length = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + length).toString("utf8")) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    expect(t.dtype).toBe("F32");
    const start = 8 + length + t.data_offsets[0];
    const count = (t.data_offsets[1] - t.data_offsets[0]) / 4;
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = bytes.readFloatLE(start + 4 * i);
    out.set(name, { shape: t.shape, data });
  }
  return out;
}

const bits = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** The `.nxw` file the server wrote for the sampler path `tinkerPath`. */
async function serverFile(serverDir: string, tinkerPath: string): Promise<string> {
  const name = `${tinkerPath.slice(tinkerPath.lastIndexOf("/") + 1)}.nxw`;
  const models = await readdir(join(serverDir, "models"));
  for (const m of models) {
    const files = await readdir(join(serverDir, "models", m, "sampler_weights")).catch(() => [] as string[]);
    if (files.includes(name)) return join(serverDir, "models", m, "sampler_weights", name);
  }
  throw new Error(`no ${name} under ${serverDir}`);
}

function io(cwd: string, env: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    cli: {
      cwd,
      env,
      version: "test",
      stdout: { write: (t: string) => void out.push(t) },
      stderr: { write: (t: string) => void err.push(t) },
      stdin: process.stdin,
    } as unknown as Parameters<typeof runCli>[1],
  };
}

describe("nexrl export --format peft of a run against nexrl serve", () => {
  it("writes an adapter whose tensors are exactly the server's LoRA factors, merging into the base gives the served weights, and nexrl checkpoints lists, downloads and deletes", async () => {
    const dir = await tempDir();
    const serverDir = join(dir, "server");
    const server = await startServer({ outputDir: serverDir, apiKey: KEY, longPollTimeoutMs: 200, log: () => {} });
    try {
      await writeJsonl(join(dir, "train.jsonl"), additionRows(6));
      const recipe = await writeRecipe(dir, grpoRecipeYaml({ steps: 2 }), [
        "service.train_service.backend=tinker",
        `+service.tinker_service.api_key=${KEY}`,
        `+service.tinker_service.base_url=${server.url}`,
        "data.batch_size=1",
      ]);
      const result = await runRecipe(recipe, { outputDir: join(dir, "out"), env: {} });
      expect(result).toMatchObject({ steps: 2, stopReason: "completed" });
      const runDir = join(dir, "out");
      const { checkpoints } = await readRunWeights(await readRunFolder(runDir));
      const last = checkpoints.at(-1)!;
      expect(last.samplerPath).toMatch(/^tinker:\/\/.+\/sampler_weights\//);

      const env = { TINKER_API_KEY: KEY, TINKER_BASE_URL: server.url };
      const exported = io(dir, env);
      expect(await runCli(["export", runDir, "--format", "peft", "--output", "adapter"], exported.cli)).toBe(0);
      expect(exported.out.join("")).toContain("adapter_model.safetensors");
      const config = JSON.parse(await readFile(join(dir, "adapter", "adapter_config.json"), "utf8"));
      expect(config).toMatchObject({ peft_type: "LORA", fan_in_fan_out: true, base_model_name_or_path: "tiny" });
      expect(config.target_modules).toEqual(["c_attn", "c_fc", "c_proj"]);
      const tensors = readSafetensors(await readFile(join(dir, "adapter", "adapter_model.safetensors")));

      // What the server holds: the trained sampler weights and the initial ones the run saved first.
      const trainedFile = decodeStateFile(
        new Uint8Array(await readFile(await serverFile(serverDir, last.samplerPath))),
        "t",
      );
      const run = await readRunFolder(runDir);
      const initialPath = (JSON.parse(await readFile(last.file, "utf8")) as { initialSamplerPath: string })
        .initialSamplerPath;
      const initial = decodeStateFile(new Uint8Array(await readFile(await serverFile(serverDir, initialPath))), "i");
      expect(run.dir).toBe(runDir);
      const cfg = trainedFile.config;
      const now = tensorViews(trainedFile.weights, cfg);
      // A Tinker model of nexrl serve trains LoRA factors: the adapter holds exactly those the server's snapshot holds.
      const lora = trainedFile.lora!;
      expect(lora).toBeTruthy();
      expect(initial.lora!.rank).toBe(lora.rank);
      expect(config.r).toBe(lora.rank);
      expect(config.lora_alpha).toBe(lora.alpha);
      const targets = loraTargets(cfg);
      expect(tensors.size).toBe(2 * targets.length);
      const r = lora.rank;
      let at = 0;
      let moved = 0;
      for (const t of targets) {
        const a = tensors.get(`base_model.model.${t.module}.lora_A.weight`)!;
        const b = tensors.get(`base_model.model.${t.module}.lora_B.weight`)!;
        expect(a.shape).toEqual([r, t.inDim]);
        expect(b.shape).toEqual([t.outDim, r]);
        const engineA = lora.factors.subarray(at, (at += r * t.inDim));
        const engineB = lora.factors.subarray(at, (at += r * t.outDim));
        if (!bits(a.data).equals(bits(engineA)) || !bits(b.data).equals(bits(engineB)))
          expect.fail(`${t.module}: the adapter's factors differ from the server's`);
        moved += b.data.filter((x) => x !== 0).length; // lora_B starts at zero
      }
      expect(moved).toBeGreaterThan(100); // training moved the factors
      // The base stayed where it was: the frozen projections, embeddings and norms of the initial snapshot.
      expect(bits(lora.base).equals(bits(initial.lora!.base))).toBe(true);
      const was = tensorViews(initial.weights, cfg);
      expect(bits(now.wte).equals(bits(was.wte))).toBe(true);
      expect(bits(now.blocks[0]!.ln1Gain).equals(bits(was.blocks[0]!.ln1Gain))).toBe(true);

      // --merge: the initial weights as a Hugging Face folder, with the adapter merged in, hold the trained projections.
      await writeHuggingFace(join(dir, "base"), cfg, initial.weights, {});
      const merging = io(dir, env);
      const args = ["export", runDir, "--format", "peft", "--merge", "base", "--output", "adapter2"];
      expect(await runCli(args, merging.cli)).toBe(0);
      expect(merging.out.join("")).toContain("merged into the base model");
      const merged = readSafetensors(await readFile(join(dir, "adapter2", "merged", "model.safetensors")));
      const original = readSafetensors(await readFile(join(dir, "base", "model.safetensors")));
      expect([...merged.keys()]).toEqual([...original.keys()]);
      for (let l = 0; l < cfg.nLayers; l++) {
        const pairs: Array<[string, Float32Array]> = [
          [`h.${l}.attn.c_attn.weight`, now.blocks[l]!.wqkv],
          [`h.${l}.attn.c_proj.weight`, now.blocks[l]!.wo],
          [`h.${l}.mlp.c_fc.weight`, now.blocks[l]!.w1],
          [`h.${l}.mlp.c_proj.weight`, now.blocks[l]!.w2],
        ];
        // W0 + (alpha/r)·(B·A)ᵀ computed as the engine materialises it: the served weights, bit for bit.
        for (const [name, w] of pairs) expect(bits(merged.get(name)!.data).equals(bits(w)), name).toBe(true);
        expect(merged.get(`h.${l}.ln_1.weight`)!.data).toEqual(original.get(`h.${l}.ln_1.weight`)!.data);
      }
      expect((await readdir(join(dir, "adapter2", "merged"))).sort()).toEqual(
        (await readdir(join(dir, "base"))).sort(),
      );

      const listed = io(dir, env);
      expect(await runCli(["checkpoints", "list", runDir], listed.cli)).toBe(0);
      expect(listed.out.join("")).toContain(`${last.samplerPath}  sampler`);
      expect(listed.out.join("")).toContain(`${last.trainingState}  training`);
      const downloaded = io(dir, env);
      expect(await runCli(["checkpoints", "download", last.samplerPath, "--output", "dl"], downloaded.cli)).toBe(0);
      const [folder] = await readdir(join(dir, "dl"));
      expect((await readdir(join(dir, "dl", folder!))).sort()).toEqual(
        [
          "adapter_config.json",
          "adapter_model.safetensors",
          "checkpoint.json",
          `${last.samplerPath.split("/").at(-1)}.nxw`,
        ].sort(),
      );
      const deleted = io(dir, env);
      expect(await runCli(["checkpoints", "delete", last.trainingState], deleted.cli)).toBe(0);
      const after = io(dir, env);
      expect(await runCli(["checkpoints", "list", runDir], after.cli)).toBe(0);
      expect(after.out.join("")).toContain(`${last.trainingState}  gone`);
    } finally {
      await server.close();
    }
  }, 120_000);
});
