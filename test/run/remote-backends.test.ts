import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import { startServer, type CapturedRequest } from "../../src/server/index.js";
import { additionRows, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** Trains the GRPO test recipe against `nexrl serve` over `backend`'s protocol and returns what the server saw. */
async function trainRemotely(backend: "tinker" | "weaver", overrides: string[] = []) {
  const dir = await tempDir();
  const requests: CapturedRequest[] = [];
  const server = await startServer({
    outputDir: join(dir, "server"),
    apiKey: "key-for-tests",
    onRequest: (r) => requests.push(r),
    longPollTimeoutMs: 200,
  });
  try {
    await writeJsonl(join(dir, "train.jsonl"), additionRows(6));
    const recipe = await writeRecipe(dir, grpoRecipeYaml({ steps: 2 }), [
      `service.train_service.backend=${backend}`,
      `+service.${backend}_service.api_key=key-for-tests`,
      `+service.${backend}_service.base_url=${server.url}`,
      "service.train_service.config.weight_decay=0.02",
      "service.train_service.config.grad_clip_norm=0.7",
      "data.batch_size=1",
      ...overrides,
    ]);
    const result = await runRecipe(recipe, { outputDir: join(dir, "out"), env: {} });
    return { result, requests };
  } finally {
    await server.close();
  }
}

/** The loss-input keys of every datum the server received. */
function lossInputKeys(requests: readonly CapturedRequest[]): string[][] {
  return requests
    .filter((r) => /forward[-_]backward/.test(r.path))
    .flatMap((r) => {
      type Input = { forward_backward_input?: { data?: Array<{ loss_fn_inputs: object }> } };
      const body = r.body as Input & { payload?: Input };
      return (
        (body.payload ?? body).forward_backward_input?.data?.map((d) => Object.keys(d.loss_fn_inputs).sort()) ?? []
      );
    });
}

describe("runRecipe against remote training services (nexrl serve on loopback)", () => {
  it("speaks the wire generation service.train_service.wire names (protobuf: the Tinker SDK 0.25's)", async () => {
    const { result, requests } = await trainRemotely("tinker", ["+service.train_service.wire=protobuf"]);
    expect(result).toMatchObject({ steps: 2, stopReason: "completed" });
    expect(requests.find((r) => r.path === "/api/v1/client/config")!.body).toEqual({ sdk_version: "0.25.0" });
    const fwdbwd = requests.filter((r) => r.path === "/api/v1/forward_backward");
    expect(fwdbwd.length).toBeGreaterThan(0);
    expect(fwdbwd.every((r) => r.headers["content-type"] === "application/x-protobuf")).toBe(true);
    for (const k of lossInputKeys(requests)) expect(k).toEqual(["advantages", "logprobs", "target_tokens"]);
  });

  for (const backend of ["tinker", "weaver"] as const) {
    it(`trains over the ${backend} protocol with every Adam parameter and the backend's loss inputs`, async () => {
      const { result, requests } = await trainRemotely(backend);
      expect(result).toMatchObject({ steps: 2, stopReason: "completed" });
      for (const row of result.metrics)
        expect([row["train/num_datums"], row["train/loss"]]).toEqual([expect.any(Number), expect.any(Number)]);
      const keys = lossInputKeys(requests);
      expect(keys.length).toBeGreaterThan(0);
      const expected =
        backend === "weaver"
          ? ["advantages", "logprobs", "loss_mask", "target_tokens"]
          : ["advantages", "logprobs", "target_tokens"];
      for (const k of keys) expect(k).toEqual(expected);
      const optim = requests.filter((r) => /optim(izer)?[-_]steps?/.test(r.path)).map((r) => JSON.stringify(r.body));
      expect(optim).toHaveLength(2);
      for (const body of optim)
        expect(body).toMatch(/"weight_decay":0\.02.*"grad_clip_norm":0\.7|"grad_clip_norm":0\.7.*"weight_decay":0\.02/);
    });
  }
});
