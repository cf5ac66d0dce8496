import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { peftFromTinkerAdapter } from "../../src/formats/lora-adapter.js";
import { mergeLoraIntoBase } from "../../src/export/merge-lora.js";
import { decodeSafetensors, encodeRawSafetensors } from "../../src/formats/safetensors.js";
import { readTar, writeTarGz } from "../../src/formats/tar.js";
import { InputError } from "../../src/errors.js";
import { failure } from "../support/http-server.js";

const text = (s: string): Uint8Array => new TextEncoder().encode(s);

describe("checkpoint archives (tar.gz)", () => {
  it("writes archives the system tar reads and reads archives the system tar writes", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-tar-"));
    const big = new Uint8Array(1500).map((_, i) => i % 251);
    await writeFile(
      join(dir, "ours.tar.gz"),
      writeTarGz(
        [
          { name: "a.json", data: text("{}\n") },
          { name: "b.bin", data: big },
        ],
        1_700_000_000,
      ),
    );
    expect(
      execFileSync("tar", ["-tzf", join(dir, "ours.tar.gz")], { encoding: "utf8" })
        .split("\n")
        .filter(Boolean),
    ).toEqual(["a.json", "b.bin"]);
    execFileSync("tar", ["-xzf", join(dir, "ours.tar.gz"), "-C", dir]);
    expect(new Uint8Array(await readFile(join(dir, "b.bin")))).toEqual(big);

    await writeFile(join(dir, "adapter_config.json"), '{"r": 2}');
    execFileSync("tar", ["-czf", join(dir, "theirs.tar.gz"), "-C", dir, "adapter_config.json", "b.bin"]);
    const entries = readTar(new Uint8Array(await readFile(join(dir, "theirs.tar.gz"))), "theirs");
    expect(entries.map((e) => e.name)).toEqual(["adapter_config.json", "b.bin"]);
    expect(entries[1]!.data).toEqual(big);
    const theirs = new Uint8Array(await readFile(join(dir, "theirs.tar.gz")));
    expect(() => readTar(theirs.subarray(0, 40), "cut")).toThrow(InputError);
    execFileSync("tar", ["-cf", join(dir, "plain.tar"), "-C", dir, "b.bin"]);
    const plain = new Uint8Array(await readFile(join(dir, "plain.tar")));
    expect(() => readTar(plain.subarray(0, 1024), "cut")).toThrow(/cut off/);
  });
});

describe("peftFromTinkerAdapter (a Tinker archive's adapter)", () => {
  const bf16 = (n: number): Uint8Array => new Uint8Array(n * 2).map((_, i) => i);
  const adapter = (shapeA: number[]) =>
    encodeRawSafetensors(
      [
        {
          name: "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
          dtype: "BF16",
          shape: shapeA,
          bytes: bf16(8),
        },
        {
          name: "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
          dtype: "BF16",
          shape: [4, 2],
          bytes: bf16(8),
        },
        { name: "base_model.model.model.unembed_tokens.lora_A.weight", dtype: "BF16", shape: [2, 4], bytes: bf16(8) },
        { name: "base_model.model.model.unembed_tokens.lora_B.weight", dtype: "BF16", shape: [4, 2], bytes: bf16(8) },
      ],
      {},
    );

  it("keeps the tensors' bytes and dtype, maps unembed_tokens to lm_head and names the target modules and base model", () => {
    const out = peftFromTinkerAdapter(text('{"r": 2, "lora_alpha": 32}'), adapter([2, 4]), "Qwen/Qwen3-8B");
    expect(out.config).toMatchObject({
      peft_type: "LORA",
      r: 2,
      lora_alpha: 32,
      base_model_name_or_path: "Qwen/Qwen3-8B",
      task_type: "CAUSAL_LM",
    });
    expect(out.config["target_modules"]).toEqual(["lm_head", "q_proj"]);
    const { tensors } = decodeSafetensors(out.safetensors, "out");
    expect(tensors.map((t) => t.name)).toEqual([
      "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
      "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
      "base_model.model.lm_head.lora_A.weight",
      "base_model.model.lm_head.lora_B.weight",
    ]);
    expect(tensors.every((t) => t.dtype === "BF16")).toBe(true);
    expect(tensors[0]!.bytes).toEqual(bf16(8));
  });

  it("refuses 3-D (mixture-of-experts) tensors and a config without r", () => {
    expect(() => peftFromTinkerAdapter(text('{"r": 2, "lora_alpha": 2}'), adapter([1, 2, 4]), undefined)).toThrow(
      InputError,
    );
    expect(() => peftFromTinkerAdapter(text('{"lora_alpha": 2}'), adapter([2, 4]), undefined)).toThrow(/"r"/);
  });
});

describe("mergeLoraIntoBase", () => {
  const bf16 = (values: number[]): Uint8Array => {
    const out = new Uint8Array(values.length * 2);
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    values.forEach((v, i) => {
      f[0] = v;
      out[2 * i] = (u[0]! >>> 16) & 0xff;
      out[2 * i + 1] = u[0]! >>> 24;
    });
    return out;
  };
  const f32 = (values: number[]): Uint8Array => new Uint8Array(new Float32Array(values).buffer);

  it("adds (alpha / r) · B @ A to BF16 weights, kept in BF16, and leaves the other tensors and files as they were", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-merge-"));
    const base = join(dir, "base");
    execFileSync("mkdir", ["-p", base]);
    // q_proj [out 2 × in 3] in BF16 (values exact in BF16), a norm untouched.
    const norm = bf16([1, 1]);
    await writeFile(
      join(base, "model.safetensors"),
      encodeRawSafetensors(
        [
          { name: "model.norm.weight", dtype: "BF16", shape: [2], bytes: norm },
          {
            name: "model.layers.0.self_attn.q_proj.weight",
            dtype: "BF16",
            shape: [2, 3],
            bytes: bf16([1, 2, 3, 4, 5, 6]),
          },
        ],
        { format: "pt" },
      ),
    );
    await writeFile(join(base, "config.json"), '{"model_type": "llama"}');
    const adapter = encodeRawSafetensors(
      [
        {
          name: "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
          dtype: "F32",
          shape: [1, 3],
          bytes: f32([1, 0, 0.5]),
        },
        {
          name: "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
          dtype: "F32",
          shape: [2, 1],
          bytes: f32([0.25, -1]),
        },
      ],
      {},
    );
    const out = join(dir, "merged");
    await mergeLoraIntoBase(base, { r: 1, lora_alpha: 2 }, adapter, out);
    const { tensors } = decodeSafetensors(new Uint8Array(await readFile(join(out, "model.safetensors"))), "merged");
    expect(tensors.map((t) => [t.name, t.dtype])).toEqual([
      ["model.norm.weight", "BF16"],
      ["model.layers.0.self_attn.q_proj.weight", "BF16"],
    ]);
    expect(tensors[0]!.bytes).toEqual(norm);
    // W + 2 · B A: row 0 += 0.5·[1, 0, 0.5], row 1 += -2·[1, 0, 0.5].
    expect(tensors[1]!.bytes).toEqual(bf16([1.5, 2, 3.25, 2, 5, 5]));
    // An infinite or NaN weight stays what it is: rounding to BF16 keeps its top bits.
    await writeFile(
      join(base, "model.safetensors"),
      encodeRawSafetensors(
        [
          {
            name: "model.layers.0.self_attn.q_proj.weight",
            dtype: "BF16",
            shape: [2, 3],
            bytes: bf16([Number.POSITIVE_INFINITY, Number.NaN, 0, 0, 0, 0]),
          },
        ],
        { format: "pt" },
      ),
    );
    const special = join(dir, "special");
    await mergeLoraIntoBase(base, { r: 1, lora_alpha: 2 }, adapter, special);
    const merged = decodeSafetensors(new Uint8Array(await readFile(join(special, "model.safetensors"))), "special");
    const first = new DataView(merged.tensors[0]!.bytes.buffer, merged.tensors[0]!.bytes.byteOffset);
    expect(first.getUint16(0, true)).toBe(0x7f80); // +Infinity
    expect(first.getUint16(2, true) & 0x7f80).toBe(0x7f80); // still NaN
    expect(first.getUint16(2, true) & 0x007f).not.toBe(0);
    expect(await readFile(join(out, "config.json"), "utf8")).toBe('{"model_type": "llama"}');
    await expect(
      mergeLoraIntoBase(
        base,
        { r: 1, lora_alpha: 2 },
        encodeRawSafetensors(
          [
            {
              name: "base_model.model.model.layers.9.mlp.up_proj.lora_A.weight",
              dtype: "F32",
              shape: [1, 3],
              bytes: f32([1, 0, 0]),
            },
            {
              name: "base_model.model.model.layers.9.mlp.up_proj.lora_B.weight",
              dtype: "F32",
              shape: [2, 1],
              bytes: f32([1, 1]),
            },
          ],
          {},
        ),
        join(dir, "other"),
      ),
    ).rejects.toThrow(/no weight for adapter module model\.layers\.9\.mlp\.up_proj/);
  });
});

describe("mergeLoraIntoBase refusals and layouts", () => {
  const f32 = (values: number[]): Uint8Array => new Uint8Array(new Float32Array(values).buffer);
  const pair = (module: string, a: number[], b: number[], shapeA: number[], shapeB: number[]) => [
    { name: `base_model.model.${module}.lora_A.weight`, dtype: "F32", shape: shapeA, bytes: f32(a) },
    { name: `base_model.model.${module}.lora_B.weight`, dtype: "F32", shape: shapeB, bytes: f32(b) },
  ];
  const adapter = (tensors: ReturnType<typeof pair>) => encodeRawSafetensors(tensors, {});
  const config = { r: 1, lora_alpha: 1 };
  async function baseFolder(files: Record<string, Uint8Array | string>): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-merge-base-"));
    for (const [name, data] of Object.entries(files)) await writeFile(join(dir, name), data);
    return dir;
  }
  const out = async () => join(await mkdtemp(join(tmpdir(), "nexrl-merge-out-")), "merged");

  it("merges across the shards an index names, [out, in] weights without fan_in_fan_out, and skips tensors that are not LoRA factors", async () => {
    const base = await baseFolder({
      "model-00001-of-00002.safetensors": encodeRawSafetensors(
        [{ name: "a.weight", dtype: "F32", shape: [2, 2], bytes: f32([1, 2, 3, 4]) }],
        {},
      ),
      "model-00002-of-00002.safetensors": encodeRawSafetensors(
        [{ name: "b.weight", dtype: "F32", shape: [1, 2], bytes: f32([5, 6]) }],
        {},
      ),
      "model.safetensors.index.json": JSON.stringify({
        weight_map: { "a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors" },
      }),
    });
    const merged = await out();
    const written = await mergeLoraIntoBase(
      base,
      config,
      adapter([
        ...pair("a", [1, 0], [1, 1], [1, 2], [2, 1]),
        ...pair("b", [0, 1], [2], [1, 2], [1, 1]),
        { name: "base_model.model.a.bias", dtype: "F32", shape: [2], bytes: f32([9, 9]) },
      ]),
      merged,
    );
    expect(written.map((p) => p.slice(merged.length + 1)).sort()).toEqual([
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
    ]);
    const read = async (file: string) =>
      decodeSafetensors(new Uint8Array(await readFile(join(merged, file))), file).tensors[0]!.bytes;
    // W[out][in] += B[out] · A[in]: a += [[1, 0], [1, 0]], b += [[0, 2]].
    expect(await read("model-00001-of-00002.safetensors")).toEqual(f32([2, 2, 4, 4]));
    expect(await read("model-00002-of-00002.safetensors")).toEqual(f32([5, 8]));
  });

  it("refuses what it cannot merge, saying what is wrong", async () => {
    const one = adapter(pair("w", [1, 0], [1, 1], [1, 2], [2, 1]));
    const safetensorsBase = (dtype: string, shape: number[], bytes: Uint8Array) =>
      baseFolder({ "model.safetensors": encodeRawSafetensors([{ name: "w.weight", dtype, shape, bytes }], {}) });
    const refusal = async (run: Promise<unknown>) => {
      const error = await failure(run);
      expect(error).toBeInstanceOf(InputError);
      return (error as Error).message;
    };
    const empty = await baseFolder({ "README.md": "no weights" });
    expect(await refusal(mergeLoraIntoBase(empty, config, one, await out()))).toBe(
      `${empty} holds no model.safetensors nor model.safetensors.index.json; give the folder of a Hugging Face model`,
    );
    expect(await refusal(mergeLoraIntoBase(join(empty, "absent"), config, one, await out()))).toMatch(
      /^cannot read the base model folder .*absent: ENOENT/,
    );
    const f16 = await safetensorsBase("F16", [2, 2], new Uint8Array(8));
    expect(await refusal(mergeLoraIntoBase(f16, config, one, await out()))).toBe(
      "base tensor w.weight is F16; merging reads F32 and BF16 tensors only",
    );
    const wrongShape = await safetensorsBase("F32", [3, 2], f32([0, 0, 0, 0, 0, 0]));
    expect(await refusal(mergeLoraIntoBase(wrongShape, config, one, await out()))).toBe(
      "base tensor w.weight has shape [3, 2], the adapter's change [2, 2]; is it the adapter's base model?",
    );
    const whole = encodeRawSafetensors(
      [{ name: "w.weight", dtype: "F32", shape: [2, 2], bytes: f32([1, 2, 3, 4]) }],
      {},
    );
    const cut = await baseFolder({ "model.safetensors": whole.slice(0, whole.length - 4) });
    expect(await refusal(mergeLoraIntoBase(cut, config, one, await out()))).toBe(
      "a safetensors file ends before its tensors do",
    );
    const fine = await safetensorsBase("F32", [2, 2], f32([1, 2, 3, 4]));
    expect(await refusal(mergeLoraIntoBase(fine, { r: 1 }, one, await out()))).toBe(
      "the adapter's config has no numeric r and lora_alpha",
    );
    expect(await refusal(mergeLoraIntoBase(fine, { ...config, rank_pattern: { w: 2 } }, one, await out()))).toBe(
      "the adapter has a rank_pattern; merging supports one r and lora_alpha for every module",
    );
    const half = adapter(pair("w", [1, 0], [1, 1], [1, 2], [2, 1]).slice(0, 1));
    expect(await refusal(mergeLoraIntoBase(fine, config, half, await out()))).toBe(
      "the adapter has only one of lora_A and lora_B for w",
    );
    const strangers = adapter([
      ...pair("x", [1, 0], [1, 1], [1, 2], [2, 1]),
      ...pair("y", [1, 0], [1, 1], [1, 2], [2, 1]),
    ]);
    expect(await refusal(mergeLoraIntoBase(fine, config, strangers, await out()))).toBe(
      `the base model in ${fine} has no weight for adapter modules x, y; is it the adapter's base model?`,
    );
  });
});
