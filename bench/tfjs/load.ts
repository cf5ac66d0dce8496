/**
 * Loads the tfjs-wasm reference from bench/tfjs/node_modules, installing it from the committed
 * lock file on first use. It is never a dependency of nexrl: only this benchmark needs it.
 */
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureBenchPackages } from "../lib/packages.js";
import type { Tf, TfWasm } from "./tf.js";

const tfjsDir = path.dirname(fileURLToPath(import.meta.url));

/** The ready tfjs handle and a description of the backend it runs on. */
export interface LoadedTfjs {
  tf: Tf;
  /** e.g. `tfjs-core 4.22.0, wasm backend, simd on, threads off`. */
  description: string;
}

export async function loadTfjs(log: (message: string) => void): Promise<LoadedTfjs> {
  ensureBenchPackages(tfjsDir, "@tensorflow/tfjs-backend-wasm", "the tfjs reference", log);
  const wasmPackage = path.join(tfjsDir, "node_modules", "@tensorflow", "tfjs-backend-wasm");
  // Resolve from bench/tfjs so both packages share one tfjs-core instance (the backend registers into it).
  const require = createRequire(path.join(tfjsDir, "package.json"));
  const tf = require("@tensorflow/tfjs-core") as Tf;
  // tfjs-core's Node bundle registers no gradients (its gradient modules are extensionless ESM
  // that Node cannot load); the union package's bundle registers them all into the registry they share.
  require("@tensorflow/tfjs");
  const wasm = require("@tensorflow/tfjs-backend-wasm") as TfWasm;
  // The .wasm binaries ship in the package's dist folder; point the loader there so nothing is fetched.
  wasm.setWasmPaths(`${path.join(wasmPackage, "dist")}${path.sep}`);
  if (!(await tf.setBackend("wasm"))) throw new Error("tfjs could not initialise its wasm backend");
  await tf.ready();
  // Skips tfjs's debug-time argument checks, as a production tfjs user would.
  tf.enableProdMode();
  const simd = tf.env().getBool("WASM_HAS_SIMD_SUPPORT") ? "on" : "off";
  const threads = tf.env().getBool("WASM_HAS_MULTITHREAD_SUPPORT") ? "on" : "off";
  return {
    tf,
    description: `tfjs-core ${tf.version_core}, ${tf.getBackend()} backend, simd ${simd}, threads ${threads}`,
  };
}
