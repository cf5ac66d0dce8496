import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../../src/cli/run.js";
import { tensorViews } from "../../src/engine/params.js";
import { decodeStateFile } from "../../src/engine/state-file.js";
import { writeHuggingFace } from "../../src/export/hugging-face.js";
import { runRecipe } from "../../src/pipeline/run-recipe.js";
import { readRunWeights } from "../../src/run-folder/index.js";
import { readRunFolder } from "../../src/run-folder/read.js";
import { startServer } from "../../src/server/index.js";
import { additionRows, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../pipeline/helpers.js";

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
  it("writes an adapter whose tensors are exactly the server's weight changes, and nexrl checkpoints lists, downloads and deletes", async () => {
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
      const d = cfg.dModel;
      const now = tensorViews(trainedFile.weights, cfg);
      const was = tensorViews(initial.weights, cfg);
      expect(config.r).toBe(d);
      expect(config.lora_alpha).toBe(d);
      expect(tensors.size).toBe(8 * cfg.nLayers);
      let changed = 0;
      let largest = 0;
      for (let l = 0; l < cfg.nLayers; l++) {
        const modules: Array<[string, Float32Array, Float32Array, number, number]> = [
          [`transformer.h.${l}.attn.c_attn`, now.blocks[l]!.wqkv, was.blocks[l]!.wqkv, d, 3 * d],
          [`transformer.h.${l}.attn.c_proj`, now.blocks[l]!.wo, was.blocks[l]!.wo, d, d],
          [`transformer.h.${l}.mlp.c_fc`, now.blocks[l]!.w1, was.blocks[l]!.w1, d, 4 * d],
          [`transformer.h.${l}.mlp.c_proj`, now.blocks[l]!.w2, was.blocks[l]!.w2, 4 * d, d],
        ];
        for (const [module, w, w0, inDim, outDim] of modules) {
          const a = tensors.get(`base_model.model.${module}.lora_A.weight`)!;
          const b = tensors.get(`base_model.model.${module}.lora_B.weight`)!;
          const r = Math.min(inDim, outDim);
          expect(a.shape).toEqual([r, inDim]);
          expect(b.shape).toEqual([outDim, r]);
          // PEFT with fan_in_fan_out: weight[i][o] += (B @ A)[o][i]; it must be exactly W − W0.
          for (let i = 0; i < inDim; i++)
            for (let o = 0; o < outDim; o++) {
              let sum = 0;
              for (let k = 0; k < r; k++) sum += b.data[o * r + k]! * a.data[k * inDim + i]!;
              const delta = Math.fround(w[i * outDim + o]! - w0[i * outDim + o]!);
              if (sum !== delta) expect({ module, i, o, sum }).toEqual({ module, i, o, sum: delta });
              if (delta !== 0) changed++;
              largest = Math.max(largest, Math.abs(delta));
            }
        }
      }
      expect(changed).toBeGreaterThan(1000); // training moved the projections

      // --merge: the initial weights as a Hugging Face folder, with the adapter merged in, hold the trained projections.
      await writeHuggingFace(join(dir, "base"), cfg, initial.weights, {});
      const merging = io(dir, env);
      const args = ["export", runDir, "--format", "peft", "--merge", "base", "--output", "adapter2"];
      expect(await runCli(args, merging.cli)).toBe(0);
      expect(merging.out.join("")).toContain("merged into the base model");
      const merged = readSafetensors(await readFile(join(dir, "adapter2", "merged", "model.safetensors")));
      const original = readSafetensors(await readFile(join(dir, "base", "model.safetensors")));
      expect([...merged.keys()]).toEqual([...original.keys()]);
      let worst = 0;
      for (let l = 0; l < cfg.nLayers; l++) {
        const pairs: Array<[string, Float32Array]> = [
          [`h.${l}.attn.c_attn.weight`, now.blocks[l]!.wqkv],
          [`h.${l}.attn.c_proj.weight`, now.blocks[l]!.wo],
          [`h.${l}.mlp.c_fc.weight`, now.blocks[l]!.w1],
          [`h.${l}.mlp.c_proj.weight`, now.blocks[l]!.w2],
        ];
        for (const [name, w] of pairs) {
          const m = merged.get(name)!.data;
          for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(m[i]! - w[i]!));
        }
        expect(merged.get(`h.${l}.ln_1.weight`)!.data).toEqual(original.get(`h.${l}.ln_1.weight`)!.data);
      }
      expect(worst).toBeLessThan(1e-6); // W0 + (W − W0) in float32
      expect(largest).toBeGreaterThan(100 * worst + 1e-5); // against changes far larger than that
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
