/**
 * The error of reading a run folder.
 * @module
 */
import { NexrlError } from "../types/errors.js";

/**
 * A run folder (or a checkpoint in it) cannot be used: it is missing, is not a run folder, has no
 * weights at the step asked for, or its files are not what a run writes. The message names the
 * folder and what to do.
 */
export class RunFolderError extends NexrlError {}
