/**
 * Parses one command's options from its {@link CommandSpec}, with messages a user can act on: an
 * unknown option gets "did you mean" and the command's help, a missing value names the option's
 * placeholder; Node's own `parseArgs` texts never reach the user.
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { didYouMean } from "../recipe/suggest.js";
import { UsageError } from "../errors.js";
import type { CommandSpec, OptionSpec } from "./commands.js";

/** What {@link parseOptions} returns: option values by long name, and the positional arguments. */
export interface ParsedOptions {
  /** Values by long option name (`string[]` for repeatable options). */
  values: Record<string, string | boolean | string[] | undefined>;
  /** Everything that is not an option. */
  positionals: string[];
}

/** `--help`: the general help, or one command's (`train`, `serve`, …; `nexrl` for NexRL's form). */
export interface HelpCommand {
  /** Discriminator. */
  kind: "help";
  /** The command whose help to print; absent for `nexrl --help`. */
  command?: string;
}

const HELP: OptionSpec = { type: "boolean", short: "h", help: "this text." };

/** The options of `spec` with `--help`. */
function optionsOf(spec: CommandSpec): Record<string, OptionSpec> {
  return { ...spec.options, help: HELP };
}

/** `nexrl train`, or `nexrl` for NexRL's form. */
const commandLine = (spec: CommandSpec): string => (spec.name === "nexrl" ? "nexrl" : `nexrl ${spec.name}`);

/** The pointer to the command's help that ends each usage error. */
export function helpPointer(spec: CommandSpec): string {
  return `Run \`${commandLine(spec)} --help\` for its options.`;
}

/** `-c, --train-config PATH`, as the help writes an option. */
function spelled(name: string, option: OptionSpec): string {
  return `${option.short ? `-${option.short}, ` : ""}--${name}${option.value ? ` ${option.value}` : ""}`;
}

/** Throws the message for an option `spec` does not have, with the closest one it has. */
function unknownOption(spec: CommandSpec, written: string, options: Record<string, OptionSpec>): never {
  const where = `${commandLine(spec)} has no option ${written}`;
  let suggestion: string | undefined;
  if (written.startsWith("--")) {
    const name = written.slice(2);
    // An abbreviation (`--prot`) names the one option it starts; else the closest spelling.
    const starting = Object.keys(options).filter((o) => o.startsWith(name));
    const close = starting.length === 1 ? starting[0] : didYouMean(name, Object.keys(options));
    if (close !== undefined) suggestion = spelled(close, options[close]!);
  } else {
    const near = spec.nearShorts?.[written.slice(1)];
    if (near !== undefined) suggestion = spelled(near, options[near]!);
  }
  throw new UsageError(`${where}${suggestion ? `; did you mean ${suggestion}?` : ""}\n${helpPointer(spec)}`);
}

/**
 * Checks every option-like argument against `spec` before Node's parser sees it, so that an
 * unknown one is reported with a suggestion. Values of options that take one are skipped.
 */
function checkOptionNames(spec: CommandSpec, args: readonly string[], options: Record<string, OptionSpec>): void {
  const byShort = new Map(
    Object.entries(options)
      .filter(([, o]) => o.short !== undefined)
      .map(([name, o]) => [o.short!, name]),
  );
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") return;
    if (arg.startsWith("--")) {
      const name = arg.slice(2).split("=")[0]!;
      const option = options[name];
      if (!option) unknownOption(spec, `--${name}`, options);
      if (option.type === "string" && !arg.includes("=")) i++;
    } else if (arg.startsWith("-") && arg.length > 1) {
      // A group of short flags (`-rh`), or a short option with its value attached (`-cRECIPE`).
      for (const letter of arg.slice(1)) {
        const name = byShort.get(letter);
        if (name === undefined) unknownOption(spec, `-${letter}`, options);
        if (options[name]!.type === "string") {
          if (arg.length === 2) i++;
          break;
        }
      }
    }
  }
}

/** Node's message for a missing or option-like value, turned into ours. */
function valueError(spec: CommandSpec, error: Error, options: Record<string, OptionSpec>): UsageError {
  const match = /Option '(?:-\w, )?--([\w-]+)/.exec(error.message);
  const name = match?.[1];
  const option = name === undefined ? undefined : options[name];
  if (option === undefined) return new UsageError(`${error.message}\n${helpPointer(spec)}`);
  return new UsageError(
    `${spelled(name!, option)} needs a value after it${option.value ? ` (${option.value})` : ""}; a value that starts with "-" is written --${name}=VALUE\n${helpPointer(spec)}`,
  );
}

/**
 * Parses `args` as the options of `spec` (and `--help`).
 * @throws {@link UsageError} for an unknown option (with the closest known one) or an option without its value.
 */
export function parseOptions(spec: CommandSpec, args: readonly string[]): ParsedOptions {
  const options = optionsOf(spec);
  checkOptionNames(spec, args, options);
  const config: NonNullable<ParseArgsConfig["options"]> = {};
  for (const [name, { type, short, multiple }] of Object.entries(options))
    config[name] = { type, ...(short !== undefined && { short }), ...(multiple && { multiple }) };
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      strict: true,
      options: config,
    });
    return { values: values as ParsedOptions["values"], positionals };
  } catch (error) {
    throw valueError(spec, error as Error, options);
  }
}
