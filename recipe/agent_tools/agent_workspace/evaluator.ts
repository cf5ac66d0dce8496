/**
 * The reward of an agent_tools episode, with partial credit that teaches the tool-call format:
 * 1 for the exact answer after calling the right tool with the right arguments; 0.5 for that call
 * without the right final answer; 0.2 for any well-formed tool call; else 0 — an answer given
 * without calling the tool earns nothing.
 *
 * A plain function: `rollout_worker.evaluator_module_path: agent_workspace/evaluator.ts:evaluate`
 * (a class extending nexrl's `Evaluator` works too).
 */

/** A chat message of the episode, as the agent kept it. */
interface Message {
  role: string;
  content: string;
  tool_calls?: Array<{ function: { name: string; arguments: string } }>;
}

/** What the evaluator receives about an episode (nexrl's `EvaluationTarget`). */
interface Target {
  finalAnswer: string;
  observation: Message[];
  isTruncated: boolean;
}

/** Scores one episode of a row `{ question, answer, tool, arguments }`. */
export function evaluate(
  data: Record<string, unknown>,
  target: Target,
): { reward: number; metrics: Record<string, number>; extraInfo: Record<string, unknown> } {
  const expected = String(data.answer);
  const calls = target.observation.flatMap((m) => m.tool_calls ?? []);
  const parsed = calls.map((call) => {
    try {
      return { name: call.function.name, args: JSON.parse(call.function.arguments) as Record<string, unknown> };
    } catch {
      return undefined;
    }
  });
  const wanted = data.arguments as Record<string, unknown>;
  const right = parsed.some(
    (call) =>
      call !== undefined &&
      call.name === data.tool &&
      Object.entries(wanted).every(([key, value]) => String(call.args[key]) === String(value)),
  );
  const correct = target.finalAnswer.trim() === expected;
  const reward = right ? (correct ? 1 : 0.5) : calls.length > 0 ? 0.2 : 0;
  return {
    reward,
    metrics: { correct: correct ? 1 : 0, right_tool_call: right ? 1 : 0, tool_calls: calls.length },
    extraInfo: { expected, answer: target.finalAnswer },
  };
}
