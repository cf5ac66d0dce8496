/**
 * The errors of recipe loading. Each names the recipe file, the key path and, when known, the
 * composed file and line that set the key.
 * @module
 */
import { NexrlError } from "../types/errors.js";

/** One problem found in a recipe. */
export interface RecipeIssue {
  /** Where in the recipe: `trainer.total_train_steps`, `data.data_files[0]`; `""` for the whole file. */
  readonly keyPath: string;
  /** What is wrong and what to do, complete (includes the expected shape and the suggestion). */
  readonly message: string;
  /** The composed file (`file:line`) or command-line override that set the key, when known. */
  readonly definedIn?: string;
  /** The expected shape, for type and value errors (`a positive integer`, `one of "sync", …`). */
  readonly expected?: string;
  /** The closest valid key or value, when one is close enough. */
  readonly suggestion?: string;
}

/** Options of {@link RecipeError}. */
export interface RecipeErrorOptions {
  /** The recipe file being loaded (absolute path), when known. */
  file?: string;
  /** The underlying error (a YAML parser error, an exception thrown on import, …). */
  cause?: unknown;
}

/** Formats one issue as a line of a {@link RecipeError} message. */
export function formatIssue(issue: RecipeIssue): string {
  const where = issue.keyPath === "" ? "(top level)" : issue.keyPath;
  const definedIn = issue.definedIn === undefined ? "" : ` (set in ${issue.definedIn})`;
  return `${where}: ${issue.message}${definedIn}`;
}

/**
 * A recipe could not be loaded: bad YAML, a composition or interpolation problem, keys that do
 * not match the schema, a missing file or a user module that cannot be used. Lists every problem
 * found in the same pass, one per line, each with its key path.
 *
 * @example
 * ```text
 * Invalid recipe /home/me/recipe/local.yaml:
 *   - trainer.total_train_step: unknown key; did you mean `total_train_steps`? (set in /home/me/recipe/common.yaml:31)
 * ```
 */
export class RecipeError extends NexrlError {
  /** The recipe file being loaded, when known. */
  readonly file: string | undefined;
  /** Every problem found, in document order. */
  readonly issues: readonly RecipeIssue[];

  /**
   * @param issues the problems (at least one).
   * @param options the recipe file and the cause.
   */
  constructor(issues: readonly RecipeIssue[], options: RecipeErrorOptions = {}) {
    const heading = options.file === undefined ? "Invalid recipe:" : `Invalid recipe ${options.file}:`;
    const lines = issues.map((issue) => `  - ${formatIssue(issue)}`);
    super([heading, ...lines].join("\n"), options.cause === undefined ? undefined : { cause: options.cause });
    this.file = options.file;
    this.issues = issues;
  }
}

/** Why a user module could not be used; see {@link UserModuleError}. */
export type UserModuleFailure = "not_found" | "import_failed" | "missing_export" | "not_a_class" | "wrong_base";

/**
 * A user module named by a recipe (custom rollout worker, custom trainer, evaluator) could not be
 * used: the file is missing, it fails to compile or throws on import, it lacks the export, the
 * export is not a class, or the class does not extend the expected nexrl base class.
 */
export class UserModuleError extends RecipeError {
  /** What went wrong. */
  readonly reason: UserModuleFailure;

  /**
   * @param reason what went wrong.
   * @param issue the key path and the message saying what to do.
   * @param options the recipe file and the cause.
   */
  constructor(reason: UserModuleFailure, issue: RecipeIssue, options: RecipeErrorOptions = {}) {
    super([issue], options);
    this.reason = reason;
  }
}
