/**
 * examples/distributed/ as CI can check it without Docker or a cluster: every YAML parses, the
 * Kubernetes objects have their required fields and refer to each other correctly, the Compose
 * services are complete, every command they run is a `nexrl` command line the CLI's own parser
 * accepts, keys come only from the environment, the files ship in the package, and the recipe
 * validates with the built CLI. Broken fixtures show that each check can fail.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join, posix } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseCommandLine, type CliCommand } from "../../src/cli/args.js";
import { UsageError } from "../../src/errors.js";
import { root, runNexrl } from "../support/runs.js";
import { checkCompose, checkKubernetes, parseManifest, type KubeObject } from "./deployment-checks.js";

const folder = join(root, "examples/distributed");
const read = (name: string) => readFile(join(folder, name), "utf8");
const fixture = (name: string) => readFile(join(import.meta.dirname, "fixtures", name), "utf8");

/** The shipped files of the example. */
const FILES = ["README.md", "Dockerfile", "recipe.yaml", "docker-compose.yml", "kubernetes.yaml"];

/** `nexrl ARGS` parsed by the CLI's own parser; anything else is refused. */
function nexrlCommand(command: unknown): CliCommand {
  if (!Array.isArray(command) || command[0] !== "nexrl") throw new Error(`not a nexrl command: ${String(command)}`);
  return parseCommandLine(command.slice(1) as string[]);
}

/** The containers of every pod template in a manifest, with the object they belong to. */
function containers(objects: readonly KubeObject[]): { object: KubeObject; container: Record<string, unknown> }[] {
  return objects.flatMap((object) => {
    const spec = (object.podTemplate?.spec ?? {}) as { containers?: Record<string, unknown>[] };
    return (spec.containers ?? []).map((container) => ({ object, container }));
  });
}

/** The last WORKDIR of a Dockerfile: where the image's processes start. */
function lastWorkdir(dockerfile: string): string | undefined {
  return [...dockerfile.matchAll(/^WORKDIR\s+(\S+)/gm)].at(-1)?.[1];
}

describe("deployment checks (test/examples/deployment-checks.ts)", () => {
  it("name every broken field of a Kubernetes manifest", async () => {
    expect(checkKubernetes(await fixture("broken-kubernetes.yaml"))).toEqual([
      "ConfigMap/?: metadata.name: missing",
      "Secret/keys: stringData: holds api-key; keys are never written in a manifest (kubectl create secret)",
      'Deployment/worker: spec.selector.matchLabels.app: "worker" is not among spec.template.metadata.labels',
      'Deployment/worker: spec.template.spec.volumes[0].configMap.name: no ConfigMap "recipe" in the manifest',
      "Deployment/worker: spec.template.spec.containers[0].image: missing",
      'Deployment/worker: spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name: no Secret "api-keys" in the manifest',
      'Service/redis: spec.selector: {"app":"redis"} selects no pod template in the manifest',
      'Job/driver: spec.template.spec.restartPolicy: "Always" (a Job needs Never or OnFailure)',
    ]);
  });

  it("name YAML errors and objects without apiVersion or kind", () => {
    expect(
      checkKubernetes("kind: Service\nmetadata: {name: a}\n---\nmetadata: {name: b}\n---\nkey: [unclosed\n"),
    ).toEqual([
      "Service/a: apiVersion: missing",
      "document 2/b: kind: missing",
      "document 2/b: apiVersion: missing",
      expect.stringMatching(/^document 3: Flow sequence .* end with a \]/),
      "Service/a: spec.selector: missing or empty",
    ]);
  });

  it("name every broken field of a Compose file", async () => {
    const { problems } = checkCompose(await fixture("broken-compose.yml"));
    expect(problems).toEqual([
      "services.worker: neither image nor build",
      "services.worker.command: expected a list of strings (exec form)",
      "services.worker.depends_on.redis: waits for service_healthy, but redis has no healthcheck",
      "services.worker.depends_on.cache: no such service",
      'services.worker.volumes[0]: no volume "runs" in the top-level volumes',
      "services.worker.environment.TINKER_API_KEY: a secret written in the file; use ${VARIABLE} from the shell",
    ]);
  });

  it("refuse a command line the CLI would refuse", () => {
    expect(() => nexrlCommand(["nexrl", "-m", "training-service", "-c", "r.yaml", "--run-nexr"])).toThrow(UsageError);
    expect(() => nexrlCommand(["nexrl", "serve", "--port", "eighty"])).toThrow(/--port must be an integer/);
    expect(() => nexrlCommand(["nexrl", "worker", "-c", "r.yaml", "--concurency", "8"])).toThrow(UsageError);
    expect(() => nexrlCommand(["nexrl", "worker", "-c", "r.yaml", "--concurrency", "0"])).toThrow(
      /--concurrency must be a whole number/,
    );
    expect(() => nexrlCommand(["node", "main.js"])).toThrow(/not a nexrl command/);
  });
});

describe("examples/distributed", () => {
  it("ships every file in the npm package", async () => {
    const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: root,
    });
    const [pack] = JSON.parse(stdout) as [{ files: { path: string }[] }];
    const shipped = new Set(pack.files.map((f) => f.path));
    for (const name of FILES) expect(shipped, name).toContain(`examples/distributed/${name}`);
    // The paths the recipe names inside the package.
    for (const name of [
      "recipe/math/common.yaml",
      "recipe/math/data/easy_train.jsonl",
      "recipe/math/data/easy_test.jsonl",
    ])
      expect(shipped, name).toContain(name);
  });

  it("has a Kubernetes manifest with every object complete and every reference resolved", async () => {
    const text = await read("kubernetes.yaml");
    expect(checkKubernetes(text)).toEqual([]);
    const { objects } = parseManifest(text);
    expect(objects.map((o) => `${o.kind}/${o.name}`).sort()).toEqual([
      "ConfigMap/nexrl-recipe",
      "Deployment/engine",
      "Deployment/nexrl-worker",
      "Deployment/redis",
      "Job/nexrl-driver",
      "PersistentVolumeClaim/nexrl-runs",
      "Secret/nexrl-keys",
      "Service/driver",
      "Service/engine",
      "Service/redis",
    ]);
    // The ConfigMap is the recipe of the folder, so the two cannot drift apart.
    const configMap = objects.find((o) => o.kind === "ConfigMap")!.body as { data: Record<string, string> };
    expect(configMap.data["recipe.yaml"]).toBe(await read("recipe.yaml"));
  });

  it("has a Compose file whose services are complete and whose keys come from the shell", async () => {
    const { services, problems } = checkCompose(await read("docker-compose.yml"));
    expect(problems).toEqual([]);
    expect(Object.keys(services).sort()).toEqual(["driver", "engine", "redis", "worker"]);
    expect(services.worker!.deploy).toEqual({ replicas: 3 });
    for (const name of ["driver", "engine", "worker"]) expect(services[name]!.build, name).toBe(".");
    expect(services.engine!.environment).toEqual({
      NEXRL_SERVE_API_KEY: expect.stringMatching(/^\$\{NEXRL_API_KEY:\?/),
    });
    expect(services.worker!.environment).toMatchObject({
      TINKER_API_KEY: expect.stringMatching(/^\$\{NEXRL_API_KEY:\?/),
    });
  });

  it("runs only real nexrl commands, whose addresses name the services that serve them", async () => {
    const { services } = checkCompose(await read("docker-compose.yml"));
    const { objects } = parseManifest(await read("kubernetes.yaml"));
    const composeCommands = Object.fromEntries(
      ["driver", "engine", "worker"].map((name) => [name, nexrlCommand(services[name]!.command)]),
    );
    const kubeCommands = Object.fromEntries(
      containers(objects)
        .filter(({ container }) => container.image !== "redis:7.4-alpine")
        .map(({ object, container }) => [object.name, nexrlCommand(container.command)]),
    );
    for (const commands of [
      { driver: composeCommands.driver, engine: composeCommands.engine, worker: composeCommands.worker },
      { driver: kubeCommands["nexrl-driver"], engine: kubeCommands.engine, worker: kubeCommands["nexrl-worker"] },
    ]) {
      expect(commands.driver).toEqual({
        kind: "run",
        mode: "training-service",
        configPath: "recipe.yaml",
        overrides: [],
        runNexrl: true,
        tag: "math-distributed",
      });
      // Another host than loopback is served only with a key: here the environment's NEXRL_SERVE_API_KEY.
      expect(commands.engine).toMatchObject({ kind: "serve", protocol: "tinker", host: "0.0.0.0", port: 8000 });
      expect(commands.engine).not.toHaveProperty("apiKey");
      expect(commands.engine).not.toHaveProperty("insecure");
      expect(commands.worker).toEqual({
        kind: "worker",
        configPath: "recipe.yaml",
        overrides: [],
        redis: "redis://redis:6379",
        concurrency: 8,
      });
    }
    // The Redis URL and the engine's address are those of the services named redis and engine.
    expect(services.redis!.image).toBe("redis:7.4-alpine");
    const kubeServices = objects.filter((o) => o.kind === "Service").map((o) => o.name);
    expect(kubeServices.sort()).toEqual(["driver", "engine", "redis"]);
    const port = (name: string) =>
      (objects.find((o) => o.kind === "Service" && o.name === name)!.body as { spec: { ports: { port: number }[] } })
        .spec.ports[0]!.port;
    expect([port("redis"), port("engine")]).toEqual([6379, 8000]);
    // Workers sample through the driver's relay, at the address the recipe tells them.
    const recipe = parse(await read("recipe.yaml")) as {
      rollout_worker: { distributed: { url: string; inference: { host: string; port: number; public_host: string } } };
    };
    const { url, inference } = recipe.rollout_worker.distributed;
    expect(url).toBe("${oc.env:NEXRL_REDIS_URL,redis://redis:6379}");
    expect(inference).toEqual({ host: "0.0.0.0", port: 8001, public_host: "driver" });
    expect(services).toHaveProperty(inference.public_host);
    expect(port(inference.public_host)).toBe(inference.port);
    for (const { container } of containers(objects).filter(({ object }) => object.name.startsWith("nexrl-"))) {
      const env = Object.fromEntries(
        (container.env as { name: string; value?: string }[]).map((e) => [e.name, e.value ?? "(from a Secret)"]),
      );
      expect(env).toEqual({
        NEXRL_REDIS_URL: "redis://redis:6379",
        TINKER_BASE_URL: "http://engine:8000",
        TINKER_API_KEY: "(from a Secret)",
      });
    }
    for (const name of ["driver", "worker"])
      expect(services[name]!.environment, name).toMatchObject({
        NEXRL_REDIS_URL: "redis://redis:6379",
        TINKER_BASE_URL: "http://engine:8000",
      });
  });

  it("mounts the recipe where the image's processes start, and builds the image on node:20-slim", async () => {
    const dockerfile = await read("Dockerfile");
    expect(dockerfile).toMatch(/^FROM node:20-slim$/m);
    expect(dockerfile).toMatch(/npm install .*"\$\{NEXRL_PACKAGE\}"/);
    const workdir = lastWorkdir(dockerfile);
    expect(workdir).toBe("/app/node_modules/nexrl/examples/distributed");
    const recipeInImage = posix.join(workdir!, "recipe.yaml");
    const { services } = checkCompose(await read("docker-compose.yml"));
    for (const name of ["driver", "engine", "worker"])
      expect(services[name]!.volumes, name).toContain(`./recipe.yaml:${recipeInImage}:ro`);
    const { objects } = parseManifest(await read("kubernetes.yaml"));
    for (const { object, container } of containers(objects).filter(({ object }) => object.name.startsWith("nexrl-")))
      expect(container.volumeMounts, object.name).toContainEqual({
        name: "recipe",
        mountPath: recipeInImage,
        subPath: "recipe.yaml",
        readOnly: true,
      });
  });

  it("says in its README that the deployment is on paper", async () => {
    const readme = await read("README.md");
    expect(readme).toMatch(
      /\*\*On paper\.\*\*.*\n.*\n.*\n.*nobody has run them with Docker Compose or on a Kubernetes cluster yet/,
    );
    for (const command of [
      "nexrl -m training-service -c recipe.yaml --run-nexrl --tag math-distributed",
      "nexrl worker -c recipe.yaml --redis redis://redis:6379 --concurrency 8",
    ])
      expect(readme).toContain(command);
  });

  it("has a recipe that nexrl validate accepts, and refuses without the key it reads from the environment", async () => {
    const env = { ...process.env, TINKER_API_KEY: "key-for-tests" };
    const ok = await runNexrl(["validate", "-c", "examples/distributed/recipe.yaml"], { env });
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain("composed from: recipe/math/common.yaml, examples/distributed/recipe.yaml");
    const { TINKER_API_KEY: _, ...withoutKey } = env;
    const refused = await runNexrl(["validate", "-c", "examples/distributed/recipe.yaml"], { env: withoutKey });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("service.tinker_service.api_key: environment variable TINKER_API_KEY is not set");
  });
});
