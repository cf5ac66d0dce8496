/**
 * `nexrl checkpoints list|delete|download`: the Tinker checkpoints of a run (those its run-state
 * files recorded) or at `tinker://` paths, on the service that holds them.
 * @module
 */
import { join, resolve } from "node:path";
import { readTar } from "../formats/tar.js";
import { writeFiles } from "../export/write-files.js";
import { remoteCheckpoints, type RemoteCheckpoints } from "../run-folder/remote-checkpoints.js";
import { TinkerTrainingService, type TinkerCheckpoint } from "../backends/tinker/index.js";
import { parseTinkerPath, type TinkerRestClient } from "../backends/tinker/rest.js";
import type { CheckpointsCommand } from "./after-run-args.js";
import { EXIT_CODES } from "./args.js";
import type { CliIO } from "./io.js";
import { APIError } from "../errors.js";

function line(c: TinkerCheckpoint, note = ""): string {
  const flags = [c.public && "public", c.expiresAt && `expires ${c.expiresAt.toISOString()}`].filter(Boolean);
  return `${c.tinkerPath}  ${c.checkpointType}  ${c.time.toISOString()}${flags.length > 0 ? `  ${flags.join(", ")}` : ""}${note}\n`;
}

/** What the service says of each recorded path: its listing, or that it is gone. */
async function listRecorded(rest: TinkerRestClient, found: RemoteCheckpoints, io: CliIO): Promise<void> {
  const byRun = new Map<string, Map<string, TinkerCheckpoint>>();
  for (const { tinkerPath, step, role } of found.checkpoints) {
    const run = parseTinkerPath(tinkerPath).trainingRunId;
    let listed = byRun.get(run);
    if (!listed) {
      listed = new Map();
      try {
        for (const c of (await rest.listCheckpoints(run)).items) listed.set(c.tinkerPath, c);
      } catch (error) {
        if (!(error instanceof APIError && error.status === 404)) throw error;
      }
      byRun.set(run, listed);
    }
    const what = step === undefined ? "" : `  (step ${step} ${role === "sampler" ? "sampler" : "training state"})`;
    const c = listed.get(tinkerPath);
    io.stdout.write(c ? line(c, what) : `${tinkerPath}  gone (deleted or expired)${what}\n`);
  }
}

async function download(rest: TinkerRestClient, tinkerPath: string, outDir: string, io: CliIO): Promise<void> {
  const entries = readTar(await rest.downloadCheckpointArchive(tinkerPath), `the archive of ${tinkerPath}`);
  const dir = join(outDir, tinkerPath.slice("tinker://".length).replace(/[^A-Za-z0-9._-]+/g, "_"));
  const files = await writeFiles(
    dir,
    entries.map((e) => [e.name, e.data] as const),
  );
  io.stdout.write(`${tinkerPath} → ${dir} (${files.length} files: ${entries.map((e) => e.name).join(", ")})\n`);
}

/** Runs `nexrl checkpoints`. */
export async function runCheckpoints(command: CheckpointsCommand, io: CliIO): Promise<number> {
  const log = (text: string): void => void io.stderr.write(`${text}\n`);
  if (command.targets.length === 0) {
    const service = new TinkerTrainingService({ env: io.env, log });
    try {
      const rest = await service.rest();
      for (let offset = 0; ;) {
        const page = await rest.listUserCheckpoints({ offset, limit: 100 });
        for (const c of page.items) io.stdout.write(line(c));
        offset += page.items.length;
        if (page.items.length === 0 || !page.cursor || offset >= page.cursor.totalCount) break;
      }
    } finally {
      await service.close();
    }
    return EXIT_CODES.ok;
  }
  for (const target of command.targets) {
    const found = await remoteCheckpoints(target, { cwd: io.cwd, env: io.env, log });
    try {
      const rest = await found.service.rest();
      if (command.action === "list") await listRecorded(rest, found, io);
      for (const { tinkerPath } of command.action === "list" ? [] : found.checkpoints) {
        if (command.action === "delete") {
          await rest.deleteCheckpoint(tinkerPath);
          io.stdout.write(`deleted ${tinkerPath}\n`);
        } else await download(rest, tinkerPath, resolve(io.cwd, command.output ?? "."), io);
      }
    } finally {
      await found.service.close();
    }
  }
  return EXIT_CODES.ok;
}
