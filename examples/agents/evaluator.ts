/**
 * The reward of the SDK examples, a plain function (no nexrl import): 1 when the final answer is
 * the row's answer, 0.5 when it contains it, else 0.
 */
interface Target {
  finalAnswer: string;
}

export function evaluate(data: { answer?: unknown }, target: Target): { reward: number } {
  const expected = String(data.answer);
  const answer = target.finalAnswer.trim();
  return { reward: answer === expected ? 1 : answer.includes(expected) ? 0.5 : 0 };
}
