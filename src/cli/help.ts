/**
 * The help texts: `nexrl --help` (every command, NexRL's options, the exit codes) and
 * `nexrl COMMAND --help` (that command's usage, options and examples), written from the command
 * specs the parsers use.
 * @module
 */
import { EXIT_CODES } from "./args.js";
import { COMMANDS, commandSpec, type CommandSpec, type OptionSpec } from "./commands.js";

const WIDTH = 100;
const COLUMN = 29;

/** `text` wrapped to lines of at most `WIDTH` characters, each indented by `indent` after the first. */
function wrap(text: string, indent: number, first = indent): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    const limit = WIDTH - (lines.length === 0 ? first : indent);
    if (line !== "" && line.length + 1 + word.length > limit) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines.map((l, i) => (i === 0 ? l : `${" ".repeat(indent)}${l}`));
}

/** `  label      description`, the description in its column (on the next line when the label is long). */
function row(label: string, description: string): string {
  const head = `  ${label}`;
  if (head.length > COLUMN - 1) return `${head}\n${" ".repeat(COLUMN)}${wrap(description, COLUMN).join("\n")}`;
  return `${head.padEnd(COLUMN)}${wrap(description, COLUMN, COLUMN).join("\n")}`;
}

function optionRows(options: Record<string, OptionSpec>): string[] {
  return Object.entries(options)
    .filter(([, o]) => !o.hidden)
    .map(([name, o]) => row(`${o.short ? `-${o.short}, ` : "    "}--${name}${o.value ? ` ${o.value}` : ""}`, o.help));
}

/** A usage line: `nexrl` before a command's first line, its width of spaces before the lines that continue it. */
const usageLine = (line: string): string => `  ${line.startsWith(" ") ? "      " : "nexrl "}${line}`;

const commandLine = (spec: CommandSpec): string => (spec.name === "nexrl" ? "nexrl" : `nexrl ${spec.name}`);

/** The text of `nexrl COMMAND --help` (`nexrl` for NexRL's form). */
export function commandHelp(name: string, version: string): string {
  const spec = commandSpec(name);
  const sections = [
    `${commandLine(spec)} (nexrl ${version}) — ${spec.summary}`,
    ["Usage:", ...spec.usage.map(usageLine)].join("\n"),
    ["Options:", ...optionRows(spec.options), row("-h, --help", "this text.")].join("\n"),
    ...(spec.positionals ? [["Arguments:", ...spec.positionals.map(([a, d]) => row(a, d))].join("\n")] : []),
    ["Examples:", ...spec.examples.map((e) => `  ${e}`)].join("\n"),
    ...(spec.notes ?? []).map((n) => wrap(n, 0).join("\n")),
    "Exit codes: see `nexrl --help`.",
  ];
  return `${sections.join("\n\n")}\n`;
}

/** The text of `nexrl --help`. */
export function helpText(version: string): string {
  const nexrl = commandSpec("nexrl");
  const words = COMMANDS.filter((c) => c !== nexrl);
  return `nexrl ${version} — post-train LLMs and agents with RL and SFT

Usage:
${[...words.slice(0, 1), nexrl, ...words.slice(1)].flatMap((c) => c.usage.map(usageLine)).join("\n")}

Commands (\`nexrl COMMAND --help\` for each one's options and examples):
${words.map((c) => row(c.name, c.summary)).join("\n")}

Options of NexRL's form (nexrl -m training-service -c RECIPE ...):
${optionRows(nexrl.options).join("\n")}
${row("-h, --help", "this text.")}
${nexrl.positionals!.map(([a, d]) => row(a, d)).join("\n")}

Examples:
${[...commandSpec("train").examples.slice(0, 1), ...nexrl.examples.slice(0, 1), "nexrl validate -c recipe.yaml", "nexrl report runs/first --open"].map((e) => `  ${e}`).join("\n")}

Exit codes:
  ${EXIT_CODES.ok}    success
  ${EXIT_CODES.invalidRecipe}    the recipe is invalid (file, key path and a suggestion are printed)
  ${EXIT_CODES.usage}    the command line is malformed
  ${EXIT_CODES.runFailed}    the run failed, or asked for something this version cannot do yet
  ${EXIT_CODES.outputDir}    the output folder cannot be written, or another run is using it
  ${EXIT_CODES.noRolloutSucceeded}    a training step had no successful rollout (see failures.jsonl)
  ${EXIT_CODES.hung}    the run hung: user code never settled and nothing could progress
  ${EXIT_CODES.interrupted}  interrupted (Ctrl-C): the step in flight finished, a checkpoint was saved
  ${EXIT_CODES.terminated}  terminated (SIGTERM): as for Ctrl-C
`;
}
