/**
 * `rollout_worker.judge:` — the LLM judge that scores math answers when
 * `rollout_worker.agent.math.judge_mode` is `llm_judge` or `rule+llm_judge`.
 * @module
 */
import { z } from "zod";
import { nonEmpty, nonNegativeInt, positiveInt } from "./common.js";

/** The placeholders a rubric may use in each judge mode. */
export const RUBRIC_PLACEHOLDERS = {
  score: ["prompt", "response", "ground_truth"],
  group_rank: ["prompt", "responses", "ground_truth", "n"],
} as const;

/** The placeholder a rubric of each mode must contain: what the judge judges. */
const REQUIRED_PLACEHOLDER = { score: "response", group_rank: "responses" } as const;

/** The rubric of `mode: score` when the recipe gives none. */
export const DEFAULT_SCORE_RUBRIC = `You grade an answer to a task.

Task:
{{prompt}}

Reference answer (may be empty):
{{ground_truth}}

Answer to grade:
{{response}}

Judge whether the answer is correct and well justified. Reply with JSON only, in this form:
{"score": <a number from 0 to 1>, "reason": "<one sentence>"}`;

/** The rubric of `mode: group_rank` when the recipe gives none. */
export const DEFAULT_GROUP_RUBRIC = `You compare {{n}} answers to the same task.

Task:
{{prompt}}

Reference answer (may be empty):
{{ground_truth}}

{{responses}}

Rank the answers from best to worst by correctness and justification. Reply with JSON only, in this form:
{"ranking": [<every answer number once, best first>], "reason": "<one sentence>"}`;

/** Shape of `rollout_worker.judge:`. */
export const judgeSchema = z
  .strictObject({
    /** Base URL of the judge's OpenAI-compatible API, e.g. `http://127.0.0.1:8000/v1` (`/chat/completions` is added). */
    base_url: z.url(),
    /** The judge model's name on that endpoint. */
    model: nonEmpty,
    /**
     * Name of the environment variable that holds the judge's API key (the key itself never goes
     * in a recipe, a log or an error). Unset: requests carry the placeholder key `EMPTY`, as local
     * vLLM-style servers expect.
     */
    api_key_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name such as JUDGE_API_KEY")
      .optional(),
    /**
     * `score`: the judge scores each rollout alone, from 0 to 1. `group_rank`: the judge sees the
     * `rollout_repeat_n` answers of a task together and ranks them; the best gets 1, the worst 0,
     * evenly spaced between.
     */
    mode: z.enum(["score", "group_rank"]).default("score"),
    /**
     * The judge's prompt, with `{{prompt}}`, `{{ground_truth}}` and `{{response}}` (mode `score`)
     * or `{{responses}}` (the numbered answers) and `{{n}}` (mode `group_rank`). The judge must
     * reply with JSON `{"score": x}` (or a line `score: x`), or `{"ranking": [...]}` (or a line
     * `ranking: 2, 1, 3`). Default: a correctness rubric for the mode.
     */
    rubric: nonEmpty.optional(),
    /** The judge's sampling temperature. */
    temperature: z.number().min(0).default(0),
    /** Most tokens of a judge's reply. */
    max_tokens: positiveInt.default(512),
    /** Judge requests in flight at once, over all rollouts of the run. */
    max_concurrency: positiveInt.default(8),
    /** Seconds one judge request may take before it counts as failed (and is retried). */
    timeout_seconds: z.number().positive().default(60),
    /**
     * Times a judge request is retried after a timeout, an HTTP error or a reply with no usable
     * score; then the rollout fails, with the judge's last reply in the error.
     */
    max_retries: nonNegativeInt.default(2),
    /** Reuse the verdict of an identical judge prompt (same rubric, task and answers) within the run. */
    cache: z.boolean().default(true),
  })
  .superRefine((judge, ctx) => {
    if (judge.rubric === undefined) return;
    const allowed: readonly string[] = RUBRIC_PLACEHOLDERS[judge.mode];
    for (const [, name] of judge.rubric.matchAll(/\{\{\s*([^}]*?)\s*\}\}/g)) {
      if (!allowed.includes(name!)) {
        ctx.addIssue({
          code: "custom",
          path: ["rubric"],
          message: `unknown placeholder {{${name}}} for mode \`${judge.mode}\`; use ${allowed.map((p) => `{{${p}}}`).join(", ")}`,
        });
      }
    }
    const required = REQUIRED_PLACEHOLDER[judge.mode];
    if (!new RegExp(`\\{\\{\\s*${required}\\s*\\}\\}`).test(judge.rubric)) {
      ctx.addIssue({
        code: "custom",
        path: ["rubric"],
        message: `a \`${judge.mode}\` rubric must show the judge {{${required}}}`,
      });
    }
  });

/** `rollout_worker.judge` of a parsed recipe. */
export type JudgeConfig = z.output<typeof judgeSchema>;
