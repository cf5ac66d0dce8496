/**
 * Rule-based answer extraction and comparison for math rollouts.
 * @module
 */

/** The content of the last `\boxed{…}` in `text` (nested braces allowed), if any. */
function lastBoxed(text: string): string | undefined {
  const start = text.lastIndexOf("\\boxed{");
  if (start < 0) return undefined;
  let depth = 0;
  for (let i = start + "\\boxed".length; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}" && --depth === 0) return text.slice(start + "\\boxed{".length, i);
  }
  return undefined;
}

/**
 * The final answer written in a response: the last `\boxed{…}`, else the last
 * `<answer>…</answer>`, else what follows the last `####`, else the last number in the text.
 * Undefined when the response holds none of these.
 */
export function extractFinalAnswer(response: string): string | undefined {
  const boxed = lastBoxed(response);
  if (boxed !== undefined) return boxed.trim();
  const tagged = [...response.matchAll(/<answer>([\s\S]*?)<\/answer>/g)].at(-1);
  if (tagged) return tagged[1]!.trim();
  const hashes = response.lastIndexOf("####");
  if (hashes >= 0 && response.slice(hashes + 4).trim() !== "") return response.slice(hashes + 4).trim();
  return response.match(/-?\d[\d,]*(?:\.\d+)?/g)?.at(-1);
}

/** `answer` without dollar signs, thousands separators, surrounding spaces or a final period. */
function normalise(answer: string): string {
  return answer
    .replace(/\$/g, "")
    .replace(/(\d),(?=\d{3}\b)/g, "$1")
    .trim()
    .replace(/\.$/, "")
    .toLowerCase();
}

/**
 * Whether an extracted answer equals the ground truth: numerically when both are numbers
 * (`12.0` equals `12`), else as text ignoring case, spaces, `$` and thousands separators.
 */
export function answersMatch(answer: string | undefined, groundTruth: string): boolean {
  if (answer === undefined) return false;
  const [a, b] = [normalise(answer), normalise(groundTruth)];
  const [x, y] = [Number(a), Number(b)];
  if (a !== "" && b !== "" && Number.isFinite(x) && Number.isFinite(y))
    return Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(y));
  return a.replace(/\s+/g, "") === b.replace(/\s+/g, "");
}

/** The ground truth of a math row: `ground_truth`, or NexRL's `reward_model.ground_truth`. */
export function groundTruthOf(row: Readonly<Record<string, unknown>>): string | undefined {
  const direct = row.ground_truth;
  if (typeof direct === "string" || typeof direct === "number") return String(direct);
  const model = row.reward_model;
  if (typeof model === "object" && model !== null) {
    const nested = (model as Record<string, unknown>).ground_truth;
    if (typeof nested === "string" || typeof nested === "number") return String(nested);
  }
  return undefined;
}
