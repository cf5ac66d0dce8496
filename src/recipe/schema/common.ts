/**
 * Small zod building blocks shared by the recipe schema sections.
 * @module
 */
import { z } from "zod";

/** An integer ≥ 1. */
export const positiveInt = z.int().min(1);
/** An integer ≥ 0. */
export const nonNegativeInt = z.int().min(0);
/** A non-empty string. */
export const nonEmpty = z.string().min(1);

/** What a section's refinement reports problems to (zod's refinement context). */
export interface IssueSink {
  /** Adds an issue. */
  addIssue(issue: { code: "custom"; path: (string | number)[]; message: string }): void;
}

/**
 * Reports a setting nexrl accepts in the schema (NexRL recipes write it) but cannot honour with
 * this value: nothing would read it, so the recipe is refused rather than the setting ignored.
 */
export function refuse(ctx: IssueSink, path: (string | number)[], message: string): void {
  ctx.addIssue({ code: "custom", path, message });
}

/** `ctx` with `section` put in front of the path of every issue reported through it. */
export function within(ctx: IssueSink, section: string): IssueSink {
  return { addIssue: (issue) => ctx.addIssue({ ...issue, path: [section, ...issue.path] }) };
}

/** Why `weight.sync_weight_path` and `trainer.sync_weight_path` are refused. */
export const SELF_HOSTED_WEIGHTS =
  'self-hosted weight sync is not supported: weights reach the sampler through the training service; remove it (or set "")';
