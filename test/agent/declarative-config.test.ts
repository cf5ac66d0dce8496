/**
 * `loadAgentConfig` on real files in a temp folder: what a loaded declarative agent holds, and the
 * message of each way an `agent_config.yaml` or one of its tools can be wrong.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadAgentConfig } from "../../src/agent/declarative/config.js";
import { ConfigError } from "../../src/errors.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A workspace holding `files` (path → text); returns its folder. */
async function workspace(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-agent-config-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  return dir;
}

const TOOL_TS = "export function lookup(args) { return `looked up ${args.q}`; }\nexport const notAFunction = 3;\n";
const tools = (entries: string): string => `name: finder\ntools:\n${entries}`;
const entry = (yamlPath: string, binding: string): string =>
  `  - name: lookup\n    yaml_path: ${yamlPath}\n    binding: ${binding}\n`;

/** The ConfigError message `loadAgentConfig(file)` refuses with. */
async function refusal(file: string): Promise<string> {
  const error = await loadAgentConfig(file).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return (error as Error).message;
}

describe("loadAgentConfig", () => {
  it("loads the sampling fields, a Jinja or a plain system prompt, and tools whose schema is input_schema or parameters", async () => {
    const dir = await workspace({
      "tools/a.yaml": "description: finds things\ninput_schema: {type: object, properties: {q: {type: string}}}\n",
      "tools/b.yaml": "parameters: {type: object, required: [q]}\n",
      "tools/c.yaml": "name: c\n",
      "tools/impl.ts": TOOL_TS,
      "agent_config.yaml": [
        "type: agent",
        "name: finder",
        "system_prompt: 'Task {{ task_name }}: {{ question }}'",
        "max_turns: 3",
        "llm_config: {temperature: 0.2, max_tokens: 50, top_p: 0.8, stop: '</answer>', api_type: openai_chat_completion}",
        "tracers: [{import: ignored}]",
        "tools:",
        "  - {name: a, yaml_path: tools/a.yaml, binding: tools/impl.ts:lookup}",
        "  - {name: b, yaml_path: tools/b.yaml, binding: tools/impl.ts:lookup}",
        "  - {name: c, yaml_path: tools/c.yaml, binding: tools/impl.ts:lookup}",
        "",
      ].join("\n"),
      "plain.yaml": "system_prompt: 'Hello {{ x }}'\nsystem_prompt_type: string\n",
    });
    const config = await loadAgentConfig(join(dir, "agent_config.yaml"));
    expect(config).toMatchObject({
      name: "finder",
      maxTurns: 3,
      llm: { temperature: 0.2, maxTokens: 50, topP: 0.8, stop: "</answer>" },
    });
    const prompt = config.systemPrompt as { render(v: Record<string, unknown>): string };
    expect(prompt.render({ task_name: "search", question: "where?" })).toBe("Task search: where?");
    expect(config.tools.map((t) => t.definition.function)).toEqual([
      {
        name: "a",
        description: "finds things",
        parameters: { type: "object", properties: { q: { type: "string" } } },
      },
      { name: "b", description: "", parameters: { type: "object", required: ["q"] } },
      { name: "c", description: "", parameters: { type: "object", properties: {} } },
    ]);
    expect(await config.tools[0]!.run({ q: "cats" }, { task: {} as never, signal: AbortSignal.timeout(1000) })).toBe(
      "looked up cats",
    );
    // A plain-text prompt is kept as it is; the defaults fill the rest.
    expect(await loadAgentConfig(join(dir, "plain.yaml"))).toEqual({
      name: "agent",
      systemPrompt: "Hello {{ x }}",
      maxTurns: 8,
      llm: {},
      tools: [],
    });
  });

  it("names the file and the key for each way a config or a tool is wrong", async () => {
    const dir = await workspace({
      "tools/ok.yaml": "description: d\n",
      "tools/bad.yaml": "description: [not, text]\n",
      "tools/impl.ts": TOOL_TS,
      "tools/broken.ts": "export function f( {\n",
      "unreadable.yaml": "a: [unclosed\n",
      "invalid.yaml": "max_turns: 0\nllm_config: {top_p: 2}\n",
      "badjinja.yaml": "system_prompt: '{% if %}'\n",
      "badtool.yaml": tools(entry("tools/bad.yaml", "tools/impl.ts:lookup")),
      "missing.yaml": tools(entry("tools/nope.yaml", "tools/impl.ts:lookup")),
      "nofunction.yaml": tools(entry("tools/ok.yaml", "tools/impl.ts:notAFunction")),
      "noexport.yaml": tools(entry("tools/ok.yaml", "tools/impl.ts:absent")),
      "noimport.yaml": tools(entry("tools/ok.yaml", "tools/broken.ts:f")),
      "default.yaml": tools(entry("tools/ok.yaml", "tools/impl.ts")),
    });
    const at = (name: string) => join(dir, name);
    expect(await refusal(at("unreadable.yaml"))).toMatch(/^agent config .*unreadable\.yaml cannot be read: /);
    expect(await refusal(at("invalid.yaml"))).toMatch(
      /^agent config .*invalid\.yaml is invalid: max_turns: .*; llm_config\.top_p: /,
    );
    expect(await refusal(at("badjinja.yaml"))).toMatch(/badjinja\.yaml: system_prompt is not a valid Jinja template: /);
    expect(await refusal(at("badtool.yaml"))).toMatch(
      /badtool\.yaml: tools\[0\]\.yaml_path: .*bad\.yaml is not a tool definition: description: /,
    );
    expect(await refusal(at("missing.yaml"))).toMatch(
      /missing\.yaml: tools\[0\]\.yaml_path: `tools\/nope\.yaml` not found/,
    );
    const exportsList = "its exports: lookup, notAFunction";
    expect(await refusal(at("nofunction.yaml"))).toContain(`exports no function \`notAFunction\` (${exportsList})`);
    expect(await refusal(at("noexport.yaml"))).toContain(`exports no function \`absent\` (${exportsList})`);
    expect(await refusal(at("noimport.yaml"))).toMatch(
      /noimport\.yaml: tools\[0\]\.binding: cannot import .*broken\.ts: /,
    );
    expect(await refusal(at("default.yaml"))).toMatch(
      /default\.yaml: tools\[0\]\.binding: "tools\/impl\.ts" is not a TypeScript binding; write it as path\/to\/file\.ts:functionName/,
    );
  });
});
