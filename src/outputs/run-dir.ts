/**
 * Where a run writes its outputs.
 * @module
 */
import { resolve } from "node:path";
import { ConfigError } from "../errors.js";

/** Options of {@link resolveRunDirectory}. */
export interface RunDirectoryOptions {
  /** Names the run; defaults to the UTC start time `YYYYMMDD-HHMMSS`. */
  tag?: string;
  /** The whole output path; wins over the storage root and the tag. */
  outputDir?: string;
  /** Environment: `NEXRL_STORAGE_PATH` is the storage root (default `./runs`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Folder relative paths resolve from (default: the current directory). */
  cwd?: string;
  /** The start time, for the default tag. */
  now?: Date;
}

/** The UTC time as `YYYYMMDD-HHMMSS`. */
export function timestampTag(date: Date): string {
  return date.toISOString().replace(/[-:]/g, "").replace(/\..*$/, "").replace("T", "-");
}

/** The storage root, absolute: `NEXRL_STORAGE_PATH`, else `./runs`. */
export function storageRoot(options: Pick<RunDirectoryOptions, "env" | "cwd"> = {}): string {
  return resolve(options.cwd ?? process.cwd(), (options.env ?? process.env).NEXRL_STORAGE_PATH || "runs");
}

/**
 * The run's output folder: `outputDir`, else `<NEXRL_STORAGE_PATH or ./runs>/<tag>`, absolute.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a tag that names no folder of its own under the storage root
 * (empty, `.`, `..`, or with a path separator).
 */
export function resolveRunDirectory(options: RunDirectoryOptions = {}): string {
  if (options.outputDir) return resolve(options.cwd ?? process.cwd(), options.outputDir);
  const tag = options.tag ?? timestampTag(options.now ?? new Date());
  if (tag.trim() === "" || tag === "." || tag === ".." || /[/\\]/.test(tag))
    throw new ConfigError(
      `the tag ${JSON.stringify(tag)} names no folder of its own under ${storageRoot(options)}: give a name such as v1 (letters, digits, - and _), or --output-dir for a folder elsewhere`,
    );
  return resolve(storageRoot(options), tag);
}
