/**
 * Tinker models of `nexrl serve` train as LoRA: a run through the Tinker client trains only the
 * factors of its rank, and its checkpoint archive's PEFT adapter holds exactly the factors the
 * server's engine holds, which merged into the base give the served weights bit for bit.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { addLoraProduct, loraTargets } from "../../src/engine/lora.js";
import { initializeParameters, parameterCount, tensorViews } from "../../src/engine/params.js";
import { Rng } from "../../src/engine/prng.js";
import { decodeStateFile } from "../../src/engine/state-file.js";
import { ByteTokenizer } from "../../src/engine/tokenizer.js";
import { decodeSafetensors } from "../../src/formats/safetensors.js";
import { readTar } from "../../src/formats/tar.js";
import { TinkerTrainingService } from "../../src/backends/index.js";
import { adamParams } from "../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum, tempDir } from "../support/training.js";
import { call, tinkerSession } from "../support/server.js";

const bits = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** F32 tensors of a safetensors file, by name. */
function tensorsOf(bytes: Uint8Array): Map<string, { shape: number[]; data: Float32Array }> {
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const t of decodeSafetensors(bytes, "adapter").tensors) {
    expect(t.dtype).toBe("F32");
    const copy = new Uint8Array(t.bytes); // aligned
    out.set(t.name, { shape: t.shape, data: new Float32Array(copy.buffer) });
  }
  return out;
}

describe("LoRA training in nexrl serve (Tinker)", () => {
  it("trains rank-4 factors over frozen base weights, and the archive's adapter is exactly them", async () => {
    const outputDir = await tempDir();
    const server = await serve({ protocol: "tinker", outputDir, threads: 1 });
    const svc = new TinkerTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST });
    onCleanup(() => svc.close());
    const client = await svc.createTrainingClient({ baseModel: "tiny", loraRank: 4, seed: 3 });
    const data = [sftDatum("the cat sat on the mat"), sftDatum("low rank adapters")];
    const losses: number[] = [];
    for (let step = 0; step < 8; step++) {
      const out = await (await client.forwardBackward(data, "cross_entropy")).result();
      losses.push(out.metrics["loss:sum"]!);
      await (await client.optimStep(adamParams({ learningRate: 0.02 }))).result();
    }
    expect(losses.at(-1)!).toBeLessThan(losses[0]! - 1); // the loss falls
    const statePath = (await (await client.saveState("ck", { kind: "weights_and_optimizer" })).result()).path;
    const samplerPath = (await (await client.saveWeightsForSampler("s8")).result()).path;

    // What the server's engine holds: its state file on disk.
    const state = decodeStateFile(
      new Uint8Array(await readFile(join(outputDir, "models", "0", "checkpoints", "ck.nxs"))),
      "ck",
    );
    expect(state.lora).toMatchObject({ rank: 4, alpha: 32 });
    const lora = state.lora!;
    const config = state.config;
    // The base is the seed's initial weights, unchanged by training, as are embeddings, norms and biases.
    const initial = new Float32Array(parameterCount(config));
    initializeParameters(initial, config, new Rng(3));
    const was = tensorViews(initial, config);
    const now = tensorViews(state.weights, config);
    const targets = loraTargets(config);
    const baseOf = (n: number): Float32Array => {
      const at = targets.slice(0, n).reduce((s, t) => s + t.inDim * t.outDim, 0);
      return lora.base.subarray(at, at + targets[n]!.inDim * targets[n]!.outDim);
    };
    targets.forEach((t, n) => expect(bits(baseOf(n)).equals(bits(t.weight(was)))).toBe(true));
    expect(bits(now.wte).equals(bits(was.wte))).toBe(true);
    now.blocks.forEach((b, l) => {
      for (const key of ["ln1Gain", "bqkv", "bo", "ln2Bias", "b1", "b2"] as const)
        expect(bits(b[key]).equals(bits(was.blocks[l]![key]))).toBe(true);
    });

    const rest = await svc.rest();
    for (const path of [statePath, samplerPath]) {
      const { url } = await rest.checkpointArchiveUrl(path);
      const entries = new Map(
        readTar(new Uint8Array(await (await fetch(url)).arrayBuffer()), path).map((e) => [e.name, e.data]),
      );
      const adapterConfig = JSON.parse(new TextDecoder().decode(entries.get("adapter_config.json")!));
      expect(adapterConfig).toMatchObject({ peft_type: "LORA", r: 4, lora_alpha: 32, fan_in_fan_out: true });
      const description = JSON.parse(new TextDecoder().decode(entries.get("checkpoint.json")!));
      expect(description).toMatchObject({ base_model: "tiny", seed: 3, lora_rank: 4, lora_alpha: 32 });
      const tensors = tensorsOf(entries.get("adapter_model.safetensors")!);
      expect(tensors.size).toBe(2 * targets.length);
      let at = 0;
      targets.forEach((t, n) => {
        const a = tensors.get(`base_model.model.${t.module}.lora_A.weight`)!;
        const b = tensors.get(`base_model.model.${t.module}.lora_B.weight`)!;
        expect(a.shape).toEqual([4, t.inDim]);
        expect(b.shape).toEqual([t.outDim, 4]);
        // Bit for bit the factors of the engine's state file.
        expect(bits(a.data).equals(bits(lora.factors.subarray(at, at + 4 * t.inDim)))).toBe(true);
        at += 4 * t.inDim;
        expect(bits(b.data).equals(bits(lora.factors.subarray(at, at + 4 * t.outDim)))).toBe(true);
        at += 4 * t.outDim;
        // PEFT's merge (W0 + (alpha/r)·(B·A)ᵀ for fan_in_fan_out) gives the served weight exactly.
        const merged = baseOf(n).slice();
        addLoraProduct(merged, a.data, b.data, 4, 32 / 4, true);
        expect(bits(merged).equals(bits(t.weight(now)))).toBe(true);
        expect(bits(merged).equals(bits(baseOf(n)))).toBe(false); // and the factors moved it
      });
    }
    const sampler = decodeStateFile(
      new Uint8Array(await readFile(join(outputDir, "models", "0", "sampler_weights", "s8.nxw"))),
      "s8",
    );
    expect(bits(sampler.weights).equals(bits(state.weights))).toBe(true);
  }, 60_000);

  it("resumes a LoRA training state exactly in another model of that rank", async () => {
    const outputDir = await tempDir();
    const server = await serve({ protocol: "tinker", outputDir, threads: 1 });
    const svc = new TinkerTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST });
    onCleanup(() => svc.close());
    const data = [sftDatum("resume the adapter exactly")];
    const step = async (client: Awaited<ReturnType<typeof svc.createTrainingClient>>): Promise<void> => {
      await (await client.forwardBackward(data, "cross_entropy")).result();
      await (await client.optimStep(adamParams({ learningRate: 0.02 }))).result();
    };
    const first = await svc.createTrainingClient({ baseModel: "tiny", loraRank: 4, seed: 3 });
    for (let i = 0; i < 3; i++) await step(first);
    const saved = (await (await first.saveState("ck", { kind: "weights_and_optimizer" })).result()).path;
    const second = await svc.createTrainingClient({ baseModel: "tiny", loraRank: 4, seed: 9 }); // another base seed
    await (await second.loadState(saved, { optimizer: true })).result();
    await step(first);
    await step(second);
    await (await first.saveState("a", { kind: "weights_and_optimizer" })).result();
    await (await second.saveState("b", { kind: "weights_and_optimizer" })).result();
    const read = async (model: number, name: string) =>
      decodeStateFile(
        new Uint8Array(await readFile(join(outputDir, "models", String(model), "checkpoints", `${name}.nxs`))),
        name,
      );
    const [a, b] = [await read(0, "a"), await read(1, "b")];
    expect(bits(b.weights).equals(bits(a.weights))).toBe(true);
    expect(bits(b.lora!.factors).equals(bits(a.lora!.factors))).toBe(true);
    expect(bits(b.optimizer!.v).equals(bits(a.optimizer!.v))).toBe(true);
    // A model of another rank refuses it, saying why.
    const other = await svc.createTrainingClient({ baseModel: "tiny", loraRank: 8 });
    const refused = await (await other.loadState(saved, { optimizer: true })).result().catch((e: unknown) => e);
    expect(String((refused as Error).message)).toMatch(
      /LoRA model of rank 4, alpha 32 but this engine is a LoRA model of rank 8/,
    );
  }, 60_000);

  it("reports the rank in get_info and refuses a rank the base model cannot take with 400", async () => {
    const { url } = await serve({ protocol: "tinker", threads: 1 });
    const { sessionId, modelId } = await tinkerSession(url);
    const info = await call(url, "POST", "/api/v1/get_info", { model_id: modelId, type: "get_info" });
    expect(info.body).toMatchObject({ is_lora: true, lora_rank: 32 });
    const d = resolveModelConfig("tiny", new ByteTokenizer().vocabSize).dModel;
    const refused = await call(url, "POST", "/api/v1/create_model", {
      session_id: sessionId,
      model_seq_id: 1,
      base_model: "tiny",
      lora_config: { rank: d + 1, train_unembed: true, train_mlp: true, train_attn: true },
      type: "create_model",
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe("invalid_lora_config");
    expect(refused.body.message).toMatch(
      new RegExp(`lora rank must be an integer from 1 to the model's dModel \\(${d}.*got ${d + 1}.*at most ${d}`),
    );
    // What the engine cannot follow is refused, not ignored.
    const partial = await call(url, "POST", "/api/v1/create_model", {
      session_id: sessionId,
      model_seq_id: 2,
      base_model: "tiny",
      lora_config: { rank: 4, train_unembed: false, train_mlp: false, train_attn: true },
      type: "create_model",
    });
    expect(partial.status).toBe(422);
    expect(JSON.stringify(partial.body)).toContain(
      "nexrl serve adapts both the attention and the MLP of every block: train_attn and train_mlp must be true",
    );
  });
});
