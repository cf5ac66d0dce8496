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
