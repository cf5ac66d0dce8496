/**
 * The engine benchmark's PyTorch baseline: bench/torch/engine.py in a child process, installed on
 * first use by bench/torch/ensure-torch.sh (Debian's python3-torch with OpenBLAS; never a
 * dependency of nexrl). The child holds one model at a time, loaded from our engine's weights,
 * and answers one JSON line per request with the time of the work alone.
 */
import { spawn, spawnSync, type ChildProcessByStdio } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { ResolvedModelConfig } from "../../dist/engine/index.js";
import { gpt2Tensors } from "../../dist/export/hugging-face.js";
import type { AdamParams } from "../../dist/wire/wire.js";
import type { SelfTimed } from "../lib/timing.js";
import type { Sequence } from "../engine/workload.js";

const torchDir = path.dirname(fileURLToPath(import.meta.url));
/** Debian's interpreter, which python3-torch installs into (a `python3` on the PATH may be another one). */
const PYTHON = process.env["NEXRL_BENCH_PYTHON"] ?? "/usr/bin/python3";

/** `, Debian python3-torch 1.13.1+dfsg-4, libopenblas0-pthread 0.3.21+ds-4`, or nothing without dpkg. */
function debianPackages(): string {
  const q = spawnSync("dpkg-query", ["-W", "-f", "${Package} ${Version}\\n", "python3-torch", "libopenblas0-pthread"], {
    encoding: "utf8",
  });
  const lines = q.status === 0 ? q.stdout.trim().split("\n") : [];
  return lines.length > 0 ? `, Debian ${lines.join(", ")}` : "";
}

/** One model and its work, as bench/engine/workload.ts gives it to our engine. */
export interface TorchWorkload {
  config: ResolvedModelConfig;
  /** Our engine's weights (its flat layout); the child starts from exactly these. */
  weights: Float32Array;
  batch: Sequence[];
  adam: AdamParams;
  prompt: number[];
  maxTokens: number;
  numSamples: number;
  eosId: number;
  seed: number;
}

/** A training step's time and the summed weighted loss before its update. */
export interface TorchStep extends SelfTimed {
  loss: number;
}

/** Either a running baseline or why there is none. */
export type TorchStart = { ok: true; torch: TorchBaseline } | { ok: false; reason: string };

export class TorchBaseline {
  private readonly pending: ((reply: Record<string, unknown>) => void)[] = [];
  private failure: Error | undefined;
  private readonly weightsFile = path.join(os.tmpdir(), `nexrl-bench-torch-${process.pid}.f32`);
  /** e.g. `torch 1.13.0a0, 2 threads, /usr/bin/python3`; set by {@link TorchBaseline.load}. */
  description = "";

  private constructor(private readonly child: ChildProcessByStdio<Writable, Readable, null>) {
    createInterface({ input: child.stdout }).on("line", (line) => this.pending.shift()?.(JSON.parse(line)));
    child.on("exit", (code, signal) => {
      this.failure = new Error(`bench/torch/engine.py exited (code ${code}, signal ${signal})`);
      for (const resolve of this.pending.splice(0)) resolve({ error: this.failure.message });
    });
  }

  /**
   * Installs PyTorch if needed and apt can (bench/torch/ensure-torch.sh), then starts the child
   * with `threads` threads for torch, OpenMP and OpenBLAS.
   * @returns the baseline, or why it cannot run (the rows are then skipped).
   */
  static start(threads: number, log: (message: string) => void): TorchStart {
    const ensure = spawnSync("bash", [path.join(torchDir, "ensure-torch.sh")], {
      env: { ...process.env, NEXRL_BENCH_PYTHON: PYTHON },
      stdio: ["ignore", "inherit", "pipe"],
      encoding: "utf8",
    });
    if (ensure.stderr) log(ensure.stderr.trim());
    if (ensure.status !== 0) {
      const why = ensure.stderr.trim().split("\n").pop() ?? `exit code ${ensure.status}`;
      return { ok: false, reason: `PyTorch not available: ${why}` };
    }
    const n = String(threads);
    const child = spawn(PYTHON, [path.join(torchDir, "engine.py")], {
      // OpenMP threads that sleep between parallel regions instead of spinning: on this shared
      // machine (load ~8 on 2 cores) a spinning thread waits on one that is not scheduled, and a
      // 2-thread torch step took 7x its passive time (and 3x its 1-thread time); spinning threads
      // would also take CPU from our engine's turn that follows.
      env: {
        ...process.env,
        OMP_NUM_THREADS: n,
        OPENBLAS_NUM_THREADS: n,
        MKL_NUM_THREADS: n,
        OMP_WAIT_POLICY: "PASSIVE",
      },
      stdio: ["pipe", "pipe", "inherit"],
    });
    return { ok: true, torch: new TorchBaseline(child) };
  }

  /** Replaces the child's model and work with `w`'s, the weights passed through a raw float32 file. */
  async load(w: TorchWorkload, threads: number): Promise<void> {
    // GPT-2's names and shapes (as the Hugging Face export writes them), the data in that order.
    const tensors = gpt2Tensors(w.config, w.weights);
    const flat = new Float32Array(tensors.reduce((n, t) => n + t.data.length, 0));
    let offset = 0;
    for (const t of tensors) {
      flat.set(t.data, offset);
      offset += t.data.length;
    }
    writeFileSync(this.weightsFile, new Uint8Array(flat.buffer));
    const reply = await this.request({
      op: "load",
      threads,
      config: w.config,
      weightsFile: this.weightsFile,
      layout: tensors.map((t) => ({ name: t.name, shape: t.shape })),
      batch: w.batch,
      adam: w.adam,
      sample: {
        prompt: w.prompt,
        maxTokens: w.maxTokens,
        numSamples: w.numSamples,
        eosId: w.eosId,
        seed: w.seed,
        temperature: 1,
      },
    });
    this.description = `torch ${String(reply["torch"])}, ${String(reply["threads"])} threads, ${PYTHON}${debianPackages()}`;
  }

  /** forward + backward + AdamW on the batch. */
  async trainStep(): Promise<TorchStep> {
    const r = await this.request({ op: "train" });
    return { units: 1, ms: r["ms"] as number, loss: r["loss"] as number };
  }

  /** One sampling request; `units` is the tokens generated. */
  async sample(): Promise<SelfTimed> {
    const r = await this.request({ op: "sample" });
    return { units: r["tokens"] as number, ms: r["ms"] as number };
  }

  close(): void {
    this.child.stdin.end();
    rmSync(this.weightsFile, { force: true });
  }

  private request(message: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending.push((reply) =>
        reply["error"] === undefined ? resolve(reply) : reject(new Error(String(reply["error"]))),
      );
      this.child.stdin.write(`${JSON.stringify(message)}\n`);
    });
  }
}
