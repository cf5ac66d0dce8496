import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readTar } from "../../../src/formats/tar.js";
import { parseTinkerPath, TinkerTrainingService } from "../../../src/backends/index.js";
import { adamParams } from "../../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum } from "../../support/training.js";
import { APIError, InputError } from "../../../src/errors.js";

async function trained(options: { apiKey?: string } = {}) {
  const outputDir = await mkdtemp(join(tmpdir(), "nexrl-rest-"));
  const server = await serve({ protocol: "tinker", outputDir, ...options });
  const svc = new TinkerTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST });
  onCleanup(() => svc.close());
  const client = await svc.createTrainingClient({ baseModel: "tiny", loraRank: 4, seed: 3 });
  await (await client.forwardBackward([sftDatum("the cat sat")], "cross_entropy")).result();
  await (await client.optimStep(adamParams({ learningRate: 0.01 }))).result();
  const state = (await (await client.saveState("ck", { kind: "weights_and_optimizer" })).result()).path;
  const sampler = (await (await client.saveWeightsForSampler("s1")).result()).path;
  return { server, svc, client, state, sampler, rest: await svc.rest(), outputDir };
}

describe("Tinker checkpoint lifecycle (nexrl serve and TinkerRestClient)", () => {
  it("lists runs with a cursor, describes a run and lists its checkpoints and the user's", async () => {
    const { svc, state, sampler, rest } = await trained();
    const second = await svc.createTrainingClient({ baseModel: "tiny", loraRank: 2 });
    const first = await rest.listTrainingRuns({ limit: 1 });
    const next = await rest.listTrainingRuns({ limit: 1, offset: 1 });
    expect(first.cursor).toEqual({ offset: 0, limit: 1, totalCount: 2 });
    expect([first.items[0]!.trainingRunId, next.items[0]!.trainingRunId].sort()).toEqual(
      [parseTinkerPath(state).trainingRunId, (second as unknown as { modelId: string }).modelId].sort(),
    );
    const run = await rest.getTrainingRun(parseTinkerPath(state).trainingRunId);
    expect(run).toMatchObject({ baseModel: "tiny", isLora: true, loraRank: 4 });
    expect(run.lastCheckpoint?.tinkerPath).toBe(state);
    expect(run.lastSamplerCheckpoint?.tinkerPath).toBe(sampler);
    const listed = await rest.listCheckpoints(run.trainingRunId);
    expect(listed.items.map((c) => [c.checkpointType, c.checkpointId, c.public, c.expiresAt])).toEqual([
      ["training", "weights/ck", false, undefined],
      ["sampler", "sampler_weights/s1", false, undefined],
    ]);
    expect(listed.cursor).toBeUndefined();
    const mine = await rest.listUserCheckpoints({ limit: 1 });
    expect(mine.items.map((c) => c.tinkerPath)).toEqual([sampler]);
    expect(mine.cursor?.totalCount).toBe(2);
    await expect(rest.getTrainingRun("nope")).rejects.toMatchObject({ status: 404 });
  });

  it("publishes, unpublishes (409 when already so), sets and clears a TTL, and deletes", async () => {
    const { server, state, rest, sampler } = await trained();
    const runId = parseTinkerPath(state).trainingRunId;
    const find = async () => (await rest.listCheckpoints(runId)).items.find((c) => c.tinkerPath === state)!;
    await rest.setCheckpointPublic(state, true);
    expect((await find()).public).toBe(true);
    await expect(rest.setCheckpointPublic(state, true)).rejects.toMatchObject({ status: 409 });
    await rest.setCheckpointPublic(state, false);
    expect((await find()).public).toBe(false);
    const before = Date.now();
    await rest.setCheckpointTtl(state, 60);
    const expires = (await find()).expiresAt!.getTime();
    expect(expires).toBeGreaterThanOrEqual(before + 60_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 60_000);
    await rest.setCheckpointTtl(state, null);
    expect((await find()).expiresAt).toBeUndefined();
    await expect(rest.setCheckpointTtl(state, 0)).rejects.toMatchObject({ status: 400 });
    await rest.deleteCheckpoint(state);
    expect((await rest.listCheckpoints(runId)).items.map((c) => c.tinkerPath)).toEqual([sampler]);
    await expect(rest.deleteCheckpoint(state)).rejects.toMatchObject({ status: 404 });
    await expect(rest.checkpointArchiveUrl(state)).rejects.toBeInstanceOf(APIError);
    // The SDK's checkpoint ids have a slash; a kind other than weights/sampler_weights is refused.
    const bad = await fetch(`${server.url}/api/v1/training_runs/${encodeURIComponent(runId)}/checkpoints/other/x`, {
      method: "DELETE",
    });
    expect(bad.status).toBe(400);
    expect(() => parseTinkerPath("tinker://run/other/x")).toThrow(InputError);
  });

  it("hands out signed archive URLs, as JSON or as a redirect, that download without the API key", async () => {
    const { server, sampler, rest } = await trained({ apiKey: API_KEY });
    const { url, expires } = await rest.checkpointArchiveUrl(sampler);
    expect(url.startsWith(`${server.url}/api/v1/checkpoint_archives/`)).toBe(true);
    expect(expires.getTime() - Date.now()).toBeGreaterThan(14 * 60_000);
    const plain = await fetch(url); // no key
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("application/gzip");
    const names = readTar(new Uint8Array(await plain.arrayBuffer()), "the archive").map((e) => e.name);
    expect(names).toEqual(["adapter_config.json", "adapter_model.safetensors", "checkpoint.json", "s1.nxw"]);

    const { trainingRunId } = parseTinkerPath(sampler);
    const redirect = await fetch(
      `${server.url}/api/v1/training_runs/${encodeURIComponent(trainingRunId)}/checkpoints/sampler_weights/s1/archive`,
      // As the SDK 0.19 asks: application/gzip beside its default application/json.
      { redirect: "manual", headers: { "X-API-Key": API_KEY, accept: "application/json, application/gzip" } },
    );
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toMatch(/\/api\/v1\/checkpoint_archives\//);
    expect(Date.parse(redirect.headers.get("expires")!)).toBeGreaterThan(Date.now());
    expect((await fetch(redirect.headers.get("location")!)).status).toBe(200);

    const forged = url.slice(0, -3) + (url.endsWith("AAA") ? "BBB" : "AAA");
    expect((await fetch(forged)).status).toBe(403);
    const unsignedListing = await fetch(`${server.url}/api/v1/checkpoints`);
    expect(unsignedListing.status).toBe(401);
    expect((await rest.downloadCheckpointArchive(sampler)).length).toBeGreaterThan(1000);
  });
});
