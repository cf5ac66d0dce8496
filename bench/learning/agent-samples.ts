/** What an agent run's `samples.jsonl` shows of the model's tool calls. */
import path from "node:path";
import { readJsonl } from "./stage.js";

/** The parts of a `samples.jsonl` row read here. */
interface AgentSampleRow {
  step: number;
  reward: number;
  prompt: string;
  response: string;
  calls?: Array<{ tool_calls?: string[] }>;
}

/**
 * The fraction of the rows of `runDir/samples.jsonl` whose episode made a tool call the gateway
 * parsed (`calls[].tool_calls`), and the last row with reward 1 (prompt and response as written).
 */
export async function toolCallSamples(
  runDir: string,
): Promise<{ fraction: number; example: { step: number; prompt: string; response: string } | null }> {
  const rows = await readJsonl<AgentSampleRow>(path.join(runDir, "samples.jsonl"));
  const withCalls = rows.filter((row) => row.calls?.some((call) => (call.tool_calls ?? []).length > 0));
  const solved = rows.filter((row) => row.reward === 1).at(-1);
  return {
    fraction: rows.length === 0 ? 0 : withCalls.length / rows.length,
    example: solved ? { step: solved.step, prompt: solved.prompt, response: solved.response } : null,
  };
}
