/**
 * A few validation rollouts as text, so that a run shows what the model answers next to what it
 * should have answered, not only a score.
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import type { RolloutTask } from "../contracts/task.js";

/** One validation rollout as text. */
export interface ValidationExample {
  /** The task's prompt: its text, or the content of its last user message. */
  readonly input: string;
  /** What the model answered (`extraFields.response` of the trajectory). */
  readonly output: string;
  /** What it should have answered, when the worker recorded it (`extraFields.answer`, `ground_truth`, `expected` or `evaluation.expected`). */
  readonly target?: string;
  /** The rollout's reward. */
  readonly reward: number;
}

/** Most examples {@link validationExamples} returns by default. */
export const VALIDATION_EXAMPLES = 3;

/** Longest text shown for an input, output or target; longer ones are cut with `…`. */
const MAX_CHARS = 100;

/**
 * The prompt as text: itself, or the content of the last user message of a chat prompt (of the
 * last message when none is a user's; an `sft` row's conversation ends with the answer).
 */
function inputText(prompt: unknown): string {
  if (typeof prompt === "string") return prompt;
  if (Array.isArray(prompt)) {
    const isUser = (m: unknown): boolean =>
      typeof m === "object" && m !== null && (m as { role?: unknown }).role === "user";
    const last: unknown = prompt.findLast(isUser) ?? prompt.at(-1);
    if (typeof last === "object" && last !== null && typeof (last as { content?: unknown }).content === "string")
      return (last as { content: string }).content;
  }
  return JSON.stringify(prompt) ?? "";
}

/** The target a worker recorded: `answer` (pig_latin, sft), `ground_truth` (math), or an evaluator's `expected`. */
export function targetOf(extra: Readonly<Record<string, unknown>>): string | undefined {
  const evaluation = extra.evaluation;
  const candidates = [
    extra.answer,
    extra.ground_truth,
    extra.expected,
    typeof evaluation === "object" && evaluation !== null ? (evaluation as { expected?: unknown }).expected : undefined,
  ];
  const found = candidates.find((value) => typeof value === "string" || typeof value === "number");
  return found === undefined ? undefined : String(found);
}

/**
 * The first `count` validation rollouts (in the order of the validation rows, so that successive
 * validations show the same inputs) that have a text response in `extraFields.response`, as the
 * built-in workers and agent episodes record it. The target is the trajectory's
 * `extraFields.answer`, `ground_truth`, `expected` or `evaluation.expected`, when it has one.
 */
export function validationExamples(
  outcomes: ReadonlyArray<{ readonly task: RolloutTask; readonly trajectories: readonly Trajectory[] }>,
  count = VALIDATION_EXAMPLES,
): ValidationExample[] {
  const examples: ValidationExample[] = [];
  for (const { task, trajectories } of outcomes) {
    const t = trajectories.at(-1);
    const response = t?.extraFields.response;
    if (t === undefined || typeof response !== "string") continue;
    const target = targetOf(t.extraFields);
    examples.push({
      input: inputText(task.prompt),
      output: response,
      ...(target !== undefined && { target }),
      reward: t.reward,
    });
    if (examples.length === count) break;
  }
  return examples;
}

/** `text` on one line (newlines as `⏎`), cut to {@link MAX_CHARS}. */
function oneLine(text: string): string {
  const flat = text.trim().replace(/\r?\n/g, " ⏎ ");
  return flat.length > MAX_CHARS ? `${flat.slice(0, MAX_CHARS - 1)}…` : flat;
}

/**
 * The examples as indented lines for the progress output:
 * `  the quick fox → e-thay ick-quay ox-fay (target: e-thay ick-quay ox-fay, reward 1.000)`.
 */
export function formatValidationExamples(examples: readonly ValidationExample[]): string[] {
  return examples.map(
    (e) =>
      `  ${oneLine(e.input)} → ${oneLine(e.output) || "(nothing)"} (${e.target === undefined ? "" : `target: ${oneLine(e.target)}, `}reward ${e.reward.toFixed(3)})`,
  );
}
