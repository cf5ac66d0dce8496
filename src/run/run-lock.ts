/**
 * {@link RunLock}: the lock a run holds on its output folder, so that a second run writing to the
 * same folder is refused instead of interleaving metrics and overwriting checkpoints.
 *
 * The lock is a file whose content names its holder (pid, host, start time, command). It is
 * created with a hard link of a complete temporary file, so it never exists half-written, and
 * creation fails atomically when it exists. A lock whose process is gone (its pid is not alive on
 * this host, or belongs to another process now) is stale: it is removed and taken, so a run
 * killed with SIGKILL can be resumed at once. (proper-lockfile, the usual library, judges
 * staleness by the age of a lock it refreshes on a timer, which would make a resume after a crash
 * wait, and records no holder to name.)
 * @module
 */
import { randomBytes } from "node:crypto";
import { readFileSync, unlinkSync } from "node:fs";
import { link, mkdir, readFile, rmdir, stat, unlink, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join, relative } from "node:path";
import { makeFolder } from "../engine/storage.js";
import { RunError, type RunLockHolder } from "../errors.js";

/** Name of the lock file in a run folder. */
export const RUN_LOCK_FILE = ".nexrl.lock";

/** What the lock file holds: the holder, and what tells a dead holder from a live one. */
interface LockContent extends RunLockHolder {
  /** The kernel's boot id (Linux): a lock from before a reboot is stale. */
  bootId?: string;
  /** The process's start time in clock ticks since boot (Linux): a reused pid has another. */
  startTicks?: number;
}

/** Lock files this process holds: a lock naming this process's pid is live only if it is here. */
const held = new Set<string>();

/** A breaker file older than this was left by a process killed while breaking a stale lock. */
const BREAKER_STALE_MS = 10_000;

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** Start time of process `pid` in clock ticks since boot, from `/proc` (Linux only). */
function startTicks(pid: number): number | undefined {
  const stat = readOptional(`/proc/${pid}/stat`);
  // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
  const rest = stat?.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(rest?.[19]);
  return Number.isSafeInteger(ticks) ? ticks : undefined;
}

function ownContent(command: string): LockContent {
  const bootId = readOptional("/proc/sys/kernel/random/boot_id");
  const ticks = startTicks(process.pid);
  return {
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
    command,
    ...(bootId !== undefined && { bootId }),
    ...(ticks !== undefined && { startTicks: ticks }),
  };
}

/** True unless the lock's process is known to be gone. A lock from another host counts as live. */
function holderAlive(holder: LockContent, path: string): boolean {
  if (holder.host !== hostname()) return true;
  // This pid is ours: the lock is another run of this process, or a leftover of an earlier
  // process that had the same pid (in a container, pids repeat after a restart).
  if (holder.pid === process.pid) return held.has(path);
  const bootId = readOptional("/proc/sys/kernel/random/boot_id");
  if (holder.bootId !== undefined && bootId !== undefined && holder.bootId !== bootId) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
  }
  const ticks = startTicks(holder.pid);
  return holder.startTicks === undefined || ticks === undefined || ticks === holder.startTicks;
}

function parseContent(text: string): LockContent | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockContent>;
    return Number.isSafeInteger(value.pid) && typeof value.host === "string" ? (value as LockContent) : undefined;
  } catch {
    return undefined;
  }
}

const errorCode = (error: unknown): string | undefined => (error as NodeJS.ErrnoException).code;

/**
 * A {@link "nexrl/errors".RunError | RunError} for a file-system error on the output folder: a one-line cause and
 * what to do.
 */
export function outputDirError(dir: string, error: unknown): RunError {
  const code = errorCode(error);
  const what =
    code === "EROFS"
      ? "it is on a read-only file system"
      : code === "EACCES" || code === "EPERM"
        ? "permission denied (the folder is read-only, immutable or owned by another user)"
        : code === "ENOTDIR" || code === "EEXIST"
          ? "a part of the path is a file, not a folder"
          : code === "ENOSPC" || code === "EDQUOT"
            ? "the disk is full"
            : (error as Error).message;
  return new RunError(
    `cannot write to the output folder ${dir}: ${what}${code ? ` (${code})` : ""}; choose another with --output-dir (or NEXRL_STORAGE_PATH)`,
    { code: "output_dir", cause: error },
  );
}

/** The lock of one run on its output folder; {@link RunLock.release} gives it up. */
export class RunLock {
  private released = false;
  private readonly releaseOnExit = (): void => this.releaseSync();

  private constructor(
    /** The lock file. */
    readonly path: string,
    private readonly content: string,
    /** The outermost folder `acquire` created, if it created any. */
    private readonly created: string | undefined,
  ) {
    held.add(path);
    // A process ended by process.exit (a second Ctrl-C) gives the folder back too.
    process.on("exit", this.releaseOnExit);
  }

  /**
   * Creates `dir` if needed and locks it for this process.
   * @param command the command line recorded for whoever finds the folder locked.
   * @throws {@link "nexrl/errors".RunError | RunError} when a live process holds the folder.
   * @throws {@link "nexrl/errors".RunError | RunError} when the folder cannot be created or written.
   */
  static async acquire(dir: string, command: string = process.argv.join(" ")): Promise<RunLock> {
    let created: string | undefined;
    try {
      created = await mkdir(dir, { recursive: true });
    } catch (error) {
      // Node's recursive mkdir says ENOENT for a parent it cannot create; makeFolder finds the real reason.
      let reason = error;
      try {
        await makeFolder(dir);
      } catch (real) {
        reason = real;
      }
      throw outputDirError(dir, reason);
    }
    const path = join(dir, RUN_LOCK_FILE);
    const content = `${JSON.stringify(ownContent(command))}\n`;
    const temp = `${path}.${process.pid}-${randomBytes(4).toString("hex")}`;
    try {
      await writeFile(temp, content, { flag: "wx" });
    } catch (error) {
      throw outputDirError(dir, error);
    }
    try {
      for (;;) {
        try {
          await link(temp, path);
          return new RunLock(path, content, created);
        } catch (error) {
          if (errorCode(error) !== "EEXIST") throw outputDirError(dir, error);
        }
        const found = await readFile(path, "utf8").catch(() => undefined);
        if (found === undefined) continue; // released meanwhile: try again
        const holder = parseContent(found);
        if (holder && holderAlive(holder, path)) {
          throw new RunError(
            `the output folder ${dir} is in use by another run: pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}: ${holder.command}. ` +
              `Wait for it to end or stop it, or choose another folder with --output-dir; if that process is not running, delete ${path}`,
            {
              code: "locked",
              holder: { pid: holder.pid, host: holder.host, startedAt: holder.startedAt, command: holder.command },
            },
          );
        }
        await breakStaleLock(path, temp, found);
      }
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }

  /** Gives the folder back (once); a lock that is no longer this run's is left alone. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    held.delete(this.path);
    process.removeListener("exit", this.releaseOnExit);
    if ((await readFile(this.path, "utf8").catch(() => undefined)) === this.content)
      await unlink(this.path).catch(() => undefined);
    // A run that stopped before writing anything leaves no folder behind it either.
    if (this.created === undefined) return;
    for (let dir = dirname(this.path); !relative(this.created, dir).startsWith(".."); dir = dirname(dir)) {
      if (
        !(await rmdir(dir).then(
          () => true,
          () => false,
        )) ||
        dir === this.created
      )
        break;
    }
  }

  private releaseSync(): void {
    if (this.released) return;
    this.released = true;
    if (readOptional(this.path) === this.content.trim()) {
      try {
        unlinkSync(this.path);
      } catch {
        // Nothing more can be done while exiting.
      }
    }
  }
}

/**
 * Removes the stale lock at `path` if it still holds `stale`. Processes that found the same stale
 * lock take turns through a breaker file (made like the lock), so that none of them removes a
 * lock another has just taken.
 */
async function breakStaleLock(path: string, temp: string, stale: string): Promise<void> {
  const breaker = `${path}.break`;
  try {
    await link(temp, breaker);
  } catch (error) {
    if (errorCode(error) !== "EEXIST") throw error;
    const age = Date.now() - ((await stat(breaker).catch(() => undefined))?.mtimeMs ?? Date.now());
    if (age > BREAKER_STALE_MS) await unlink(breaker).catch(() => undefined);
    else await new Promise((resolve) => setTimeout(resolve, 20));
    return;
  }
  try {
    if ((await readFile(path, "utf8").catch(() => undefined)) === stale) await unlink(path);
  } finally {
    await unlink(breaker).catch(() => undefined);
  }
}
