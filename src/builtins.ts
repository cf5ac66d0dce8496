/**
 * The composition root: what the package root and the CLI plug into the layers below them. The
 * agent service sits above the pipeline, so its `agent` and `nexau` workers are provided to the
 * pipeline's worker registry from here (loaded on demand, when a recipe runs one); the package
 * root is provided to the recipe loader for CommonJS user modules by its importer.
 * @module
 */
import { provideAgentService } from "./workers/registry.js";
import { providePackageRoot } from "./recipe/share-package.js";
import type * as agentWorkerClass from "./agent/worker-class.js";

type AgentService = typeof agentWorkerClass;

/** The agent service's module, loaded when a recipe first needs an agent worker. */
const agentService = (): Promise<AgentService> => import("./agent/worker-class.js");

/** Provides the agent service's workers and, for CommonJS user modules, the package root that `loadRoot` loads. */
export function provideBuiltins(loadRoot: () => Promise<object>): void {
  provideAgentService({
    workerClass: async (config, base, signal) => (await agentService()).createAgentWorkerClass(config, base, signal),
    notes: async (config) => {
      const { note } = (await agentService()).agentRewardSource(config);
      return note === undefined ? [] : [note];
    },
    check: async (config, base) => {
      await (await agentService()).loadAgentParts(config, base);
    },
  });
  providePackageRoot(loadRoot);
}
