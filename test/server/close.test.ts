import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/server/index.js";
import { InFlightOperations, runOperation } from "../../src/server/operations.js";
import { ADAM, call, tinkerDatum, tinkerSession } from "../support/server.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** Every file below `dir`, with its size. */
async function files(dir: string): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = join(entry.parentPath, entry.name);
    found.set(file, (await stat(file)).size);
  }
  return found;
}

describe("closing nexrl serve", () => {
  it("counts operations until they have run, including ones started while it waits", async () => {
    const inFlight = new InFlightOperations();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const finished: string[] = [];
    inFlight.add(
      runOperation("first", async () => {
        await gate;
        finished.push("first");
        inFlight.add(runOperation("second", () => finished.push("second")));
      }),
    );
    expect(inFlight.size).toBe(1);
    let settled = false;
    const waiting = inFlight.settled().then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    release();
    await waiting;
    expect(finished).toEqual(["first", "second"]);
    expect(inFlight.size).toBe(0);
  });

  it("waits for the operations it received, so a checkpoint queued behind training is on disk when close resolves", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-close-"));
    dirs.push(dir);
    const running = await startServer({ protocol: "tinker", outputDir: dir, log: () => undefined });
    const url = running.url;
    const { modelId } = await tinkerSession(url);
    const accepted: number[] = [];
    // Four training steps and then a save, none of them polled: all still queued or running when close() is called.
    for (let step = 0; step < 4; step++) {
      const fwd = await call(url, "POST", "/api/v1/forward_backward", {
        forward_backward_input: { data: [tinkerDatum("the checkpoint waits")], loss_fn: "cross_entropy" },
        model_id: modelId,
        seq_id: 2 * step + 1,
      });
      const opt = await call(url, "POST", "/api/v1/optim_step", {
        adam_params: ADAM,
        model_id: modelId,
        seq_id: 2 * step + 2,
        type: "optim_step",
      });
      accepted.push(fwd.status, opt.status);
    }
    const save = await call(url, "POST", "/api/v1/save_weights", {
      model_id: modelId,
      path: "after-close",
      seq_id: 9,
      overwrite: false,
      type: "save_weights",
    });
    expect([...accepted, save.status]).toEqual(Array(9).fill(200));
    await running.close();
    const written = await files(dir);
    const checkpoint = [...written].filter(([file]) => file.includes("after-close"));
    expect(checkpoint.length).toBeGreaterThan(0);
    expect(checkpoint.every(([, size]) => size > 0)).toBe(true);
    // Nothing is still being written: the folder is the same a moment later.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await files(dir)).toEqual(written);
  });
});
