/**
 * The options a recipe gives a custom worker or trainer (`rollout_worker.options`,
 * `trainer.options`), and the schema a class may declare to check them.
 * @module
 */

/** A step of an {@link OptionsIssue}'s path, in its object form. */
export interface OptionsPathSegment {
  /** The key or index. */
  readonly key: PropertyKey;
}

/** One problem a {@link OptionsSchema} found, as Standard Schema reports it. */
export interface OptionsIssue {
  /** What is wrong. */
  readonly message: string;
  /** Where, as keys (or segments) from the options' root; absent for the whole value. */
  readonly path?: ReadonlyArray<PropertyKey | OptionsPathSegment> | undefined;
}

/** What an {@link OptionsSchema} says of a value: its output, or the issues found. */
export type OptionsResult<Output> =
  | {
      /** The checked (and completed) value. */
      readonly value: Output;
      /** None. */
      readonly issues?: undefined;
    }
  | {
      /** What is wrong. */
      readonly issues: ReadonlyArray<OptionsIssue>;
    };

/**
 * A schema for the recipe's options of a custom class, in the
 * [Standard Schema](https://standardschema.dev) form that zod (≥ 3.24), valibot (≥ 1) and
 * ArkType (≥ 2) schemas implement: declare one as the class's static `optionsSchema`, and the
 * run checks the recipe's options with it before the first rollout (`nexrl validate` too), gives
 * the class the schema's output (defaults filled) as `this.options`, and refuses the recipe with
 * each issue under its recipe key otherwise.
 *
 * @example
 * ```ts
 * import { z } from "zod";
 * const options = z.object({ bonus: z.number().default(0.1) });
 * export class MyWorker extends BaseRolloutWorker<MyRow, z.output<typeof options>> {
 *   static optionsSchema = options;
 *   // … this.options.bonus is a number
 * }
 * ```
 */
export interface OptionsSchema<Output = unknown> {
  /** The Standard Schema interface. */
  readonly "~standard": {
    /** The Standard Schema version: 1. */
    readonly version: 1;
    /** The library that made the schema. */
    readonly vendor: string;
    /** Checks `value`: its output, or the issues found. */
    validate(value: unknown): OptionsResult<Output> | Promise<OptionsResult<Output>>;
  };
}

/** A class's recipe options: an object of the user's own keys (spelled as in the recipe). */
export type ClassOptions = Readonly<Record<string, unknown>>;
