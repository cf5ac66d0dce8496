/**
 * `npm run smoke -- tinker` / `npm run smoke -- weaver`: a live check of a real training service
 * with your key. One SFT step (forward_backward + optim_step), one checkpoint save, sampler
 * weights, one sample; it prints what the service negotiated (Tinker: the wire generation, the
 * announced sdk_version, JWT, the client/config flags) and each step's result, and exits 1 with
 * the service's own words on the first failure. Without a key it says so and exits 0 (skipped).
 *
 * Environment: TINKER_API_KEY / TINKER_BASE_URL (WEAVER_API_KEY / WEAVER_BASE_URL);
 * NEXRL_SMOKE_MODEL picks the base model (default: the first the service lists);
 * NEXRL_TINKER_WIRE forces a Tinker wire generation (auto, json, protobuf).
 *
 * Never part of `npm test`: it spends (a little of) your account.
 */
import { performance } from "node:perf_hooks";
import {
  TINKER_DEFAULT_BASE_URL,
  TinkerTrainingService,
  WeaverTrainingService,
  type TrainingService,
} from "../src/backends/index.js";
import { adamParams, datum, modelInputFromTokens } from "../src/wire/wire.js";

const WEAVER_DEFAULT_BASE_URL = "https://weaver-console.nex-agi.cn";

type Backend = "tinker" | "weaver";

const print = (line: string): void => void process.stdout.write(`${line}\n`);

/** The base models the service lists (Tinker: get_server_capabilities; Weaver: supported-models). */
async function listedModels(backend: Backend, baseUrl: string, apiKey: string): Promise<string[]> {
  const [path, header] =
    backend === "tinker"
      ? ["/api/v1/get_server_capabilities", "X-API-Key"]
      : ["/api/v1/supported-models", "X-WEAVER-API-KEY"];
  const response = await fetch(baseUrl.replace(/\/+$/, "") + path, { headers: { [header]: apiKey } });
  if (!response.ok) throw new Error(`GET ${path} answered HTTP ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as {
    supported_models?: Array<{ model_name?: string }>;
    items?: Array<{ name?: string; status?: string }>;
  };
  return backend === "tinker"
    ? (body.supported_models ?? []).flatMap((m) => (m.model_name ? [m.model_name] : []))
    : (body.items ?? []).flatMap((m) => (m.name && (m.status ?? "healthy") === "healthy" ? [m.name] : []));
}

/** Runs `what`, printing its duration and `describe(result)`; a failure ends the check. */
async function step<T>(what: string, run: () => Promise<T>, describe: (result: T) => string): Promise<T> {
  const t0 = performance.now();
  try {
    const result = await run();
    print(`ok   ${what} (${Math.round(performance.now() - t0)} ms): ${describe(result)}`);
    return result;
  } catch (error) {
    throw Object.assign(new Error(`${what}: ${error instanceof Error ? error.message : String(error)}`), {
      cause: error,
    });
  }
}

async function smoke(backend: Backend, env: NodeJS.ProcessEnv): Promise<number> {
  const prefix = backend.toUpperCase();
  const apiKey = env[`${prefix}_API_KEY`];
  if (!apiKey) {
    print(
      `skipped: ${prefix}_API_KEY is not set. Set it (and ${prefix}_BASE_URL for another service than the default) to check the live ${backend} service.`,
    );
    return 0;
  }
  const baseUrl =
    env[`${prefix}_BASE_URL`] || (backend === "tinker" ? TINKER_DEFAULT_BASE_URL : WEAVER_DEFAULT_BASE_URL);
  print(`nexrl smoke: ${backend} at ${baseUrl}`);
  const service: TrainingService =
    backend === "tinker"
      ? new TinkerTrainingService({ apiKey, baseUrl, env, maxRetries: 3 })
      : new WeaverTrainingService({ apiKey, baseUrl, env, maxRetries: 3 });
  const stamp = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
  try {
    if (service instanceof TinkerTrainingService) {
      const n = await step(
        "client/config and session",
        () => service.negotiated(),
        (n) => `wire ${n.wire}: announced sdk_version ${n.sdkVersion}`,
      );
      print(`     forward_backward as ${n.forwardBackward}${n.compressed ? " (zstd)" : ""}; forward as ${n.forward}`);
      print(`     results asked for as: ${n.accept}`);
      print(
        `     JWT: ${n.flags.pjwt_auth_enabled ? "yes (API key exchanged at /api/v1/auth/token)" : "no (API key sent)"}`,
      );
      print(`     client/config flags: ${JSON.stringify(n.serverFlags)}`);
    } else {
      await step(
        "session",
        () => service.connect(),
        () => "created",
      );
    }
    const model =
      env.NEXRL_SMOKE_MODEL ||
      (
        await step(
          "list base models",
          () => listedModels(backend, baseUrl, apiKey),
          (m) => m.join(", ") || "none",
        )
      )[0];
    if (!model) throw new Error("the service lists no base model; set NEXRL_SMOKE_MODEL");
    const training = await step(
      `create a LoRA model on ${model}`,
      () => service.createTrainingClient({ baseModel: model, loraRank: 8 }),
      (c) => c.modelId,
    );
    // Token ids every model's vocabulary holds; no tokenizer needed.
    const tokens = Array.from({ length: 17 }, (_, i) => 100 + i);
    const sft = datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: tokens.slice(1).map(() => 1) });
    await step(
      "one SFT step (forward_backward + optim_step)",
      async () => {
        const fb = await training.forwardBackward([sft], "cross_entropy");
        const optim = await training.optimStep(adamParams({ learningRate: 1e-4 }));
        return { fb: await fb.result(), optim: await optim.result() };
      },
      ({ fb, optim }) =>
        `loss:sum ${fb.metrics["loss:sum"]?.toFixed(4)}, ${fb.lossFnOutputs[0]?.logprobs.length} logprobs; optim metrics ${JSON.stringify(optim.metrics)}`,
    );
    await step(
      "save a checkpoint",
      async () => (await training.saveState(`nexrl-smoke-${stamp}`, { kind: "weights_and_optimizer" })).result(),
      (saved) => saved.path,
    );
    const sampler = await step(
      "save sampler weights",
      async () => (await training.saveWeightsForSampler(`nexrl-smoke-${stamp}-sampler`)).result(),
      (saved) => saved.path,
    );
    await step(
      "sample once",
      async () => {
        const client = await service.createSamplingClient(sampler.path);
        return (await client.sample(modelInputFromTokens(tokens.slice(0, 8)), 1, { maxTokens: 4, seed: 1 })).result();
      },
      (out) => `tokens ${JSON.stringify(out.sequences[0]?.tokens)} (${out.sequences[0]?.stopReason})`,
    );
    print(`PASS: ${backend} trained, saved and sampled at ${baseUrl}`);
    return 0;
  } catch (error) {
    print(`FAIL: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    await service.close();
  }
}

const backend = process.argv[2];
if (backend !== "tinker" && backend !== "weaver") {
  process.stderr.write("usage: npm run smoke -- tinker|weaver\n");
  process.exit(2);
}
process.exit(await smoke(backend, process.env));
