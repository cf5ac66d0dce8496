/**
 * What each `nexrl` command accepts: its options (with their help), usage and examples. The
 * parsers (`args.ts`, `after-run-args.ts`) and the help texts (`help.ts`) both read these tables,
 * so an option cannot be parsed without being documented, nor documented without being parsed.
 * @module
 */

/** One option of a command. */
export interface OptionSpec {
  /** A flag, or an option with a value. */
  type: "string" | "boolean";
  /** The one-letter form; a letter means the same option in every command that has it. */
  short?: string;
  /** Repeatable. */
  multiple?: boolean;
  /** The value's placeholder in the help (`PATH`, `N`). */
  value?: string;
  /** Shown in the help instead of the option's own name (an alias spelled out there). */
  hidden?: boolean;
  /** What it does. */
  help: string;
}

/** One command: how it is written, what it does, its options and an example. */
export interface CommandSpec {
  /** The command word; `nexrl` for NexRL's form (no word, `-m training-service`). */
  name: string;
  /** One line for the command list. */
  summary: string;
  /** The usage lines (without the leading `nexrl `). */
  usage: string[];
  /** The options, by long name. */
  options: Record<string, OptionSpec>;
  /** Positional arguments and their help. */
  positionals?: Array<[string, string]>;
  /** Example command lines. */
  examples: string[];
  /** Paragraphs after the options. */
  notes?: string[];
  /** Short flags another command has that this one does not: the long option they most likely meant here. */
  nearShorts?: Record<string, string>;
}

const RECIPE: OptionSpec = {
  type: "string",
  short: "c",
  value: "PATH",
  help: "the recipe: YAML in NexRL's schema or a .ts module whose default export is defineRecipe({...}). Alias: --config.",
};
const CONFIG_ALIAS: OptionSpec = { type: "string", value: "PATH", hidden: true, help: "alias of --train-config" };
const TAG: OptionSpec = {
  type: "string",
  short: "t",
  value: "TAG",
  help: "names the run; outputs go to $NEXRL_STORAGE_PATH/<TAG> (./runs/<TAG> by default; a UTC timestamp without a tag).",
};
const OUTPUT_DIR: OptionSpec = {
  type: "string",
  short: "o",
  value: "DIR",
  help: "where the run writes metrics, samples and checkpoints (instead of the folder --tag names).",
};
const VERBOSE: OptionSpec = {
  type: "boolean",
  help: "on failure, print the whole stack and the chain of causes (also with the environment variable NEXRL_DEBUG=1).",
};
const OVERRIDES: [string, string] = [
  "key.path=value",
  "override a recipe key, e.g. trainer.total_train_steps=10 (+key=value adds one).",
];

/** `nexrl train`: the short form of a training run. */
const train: CommandSpec = {
  name: "train",
  summary: "train with a recipe (the short form of nexrl -m training-service -c RECIPE --run-nexrl).",
  usage: ["train -c RECIPE [--tag TAG | --output-dir DIR] [--verbose] [key.path=value ...]"],
  options: { "train-config": RECIPE, config: CONFIG_ALIAS, tag: TAG, "output-dir": OUTPUT_DIR, verbose: VERBOSE },
  positionals: [OVERRIDES],
  examples: [
    "nexrl train -c recipe/pig_latin/local.yaml",
    "nexrl train -c recipe.yaml --tag first trainer.total_train_steps=10",
  ],
  notes: ["Progress prints one line per step; Ctrl-C stops after the step in flight and saves a checkpoint."],
};

/** NexRL's form: `nexrl -m training-service -c RECIPE [--run-nexrl]`. */
const nexrl: CommandSpec = {
  name: "nexrl",
  summary: "NexRL's command line: prints the resolved recipe and the plan, and trains with --run-nexrl.",
  usage: [
    "-m training-service -c RECIPE [--run-nexrl] [--tag TAG] [--output-dir DIR] [--verbose] [key.path=value ...]",
  ],
  options: {
    mode: {
      type: "string",
      short: "m",
      value: "MODE",
      help: "training-service (the default; trains through a training service: local, tinker or weaver). self-hosted is not supported.",
    },
    "train-config": RECIPE,
    config: CONFIG_ALIAS,
    "run-nexrl": {
      type: "boolean",
      short: "r",
      help: "run the training. Without it, the resolved recipe and the plan are printed and nothing runs.",
    },
    tag: TAG,
    "output-dir": OUTPUT_DIR,
    verbose: VERBOSE,
    version: { type: "boolean", short: "v", help: "print the version." },
  },
  positionals: [OVERRIDES],
  examples: [
    "nexrl -m training-service -c recipe/pig_latin/local.yaml --run-nexrl",
    "nexrl -m training-service -c recipe.yaml trainer.total_train_steps=10   # the plan only",
  ],
};

const validate: CommandSpec = {
  name: "validate",
  summary:
    "a dry run of the checks a run makes before its first rollout (modules, model, tokenizer, reward, lengths, data); exit 1 if a run would fail.",
  usage: ["validate -c RECIPE [--verbose] [key.path=value ...]"],
  options: { "train-config": RECIPE, config: CONFIG_ALIAS, verbose: VERBOSE },
  positionals: [OVERRIDES],
  examples: ["nexrl validate -c recipe/math/local.yaml", "nexrl validate -c recipe.yaml data.rollout_repeat_n=8"],
};

const serve: CommandSpec = {
  name: "serve",
  summary:
    "serve the local engine over the Tinker, Weaver and OpenAI-compatible protocols until stopped (Ctrl-C), so tinker/weaver recipes run without a remote service.",
  usage: [
    "serve [--protocol tinker|weaver|openai|all] [--host HOST] [--port PORT] [--output-dir DIR]",
    "      [--faults SPEC] [--seed N] [--threads N] [--session-timeout SECONDS] [--memory-budget MB]",
    "      [--api-key KEY] [--insecure]",
    "      [--tinker-flag KEY=VALUE ...] [--model RUN_DIR[:STEP] ...]",
    "      [--allow-host NAME ...] [--cors ORIGIN ...]",
  ],
  options: {
    protocol: {
      type: "string",
      short: "p",
      value: "PROTOCOL",
      help: "tinker, weaver, openai (/v1/completions, /v1/chat/completions) or all (the default).",
    },
    host: {
      type: "string",
      value: "HOST",
      help: "interface to bind (default 127.0.0.1: this machine only). Another address needs --api-key (or --insecure).",
    },
    port: { type: "string", value: "PORT", help: "port (default 8000); 0 picks a free port. The URL is printed." },
    "output-dir": {
      type: "string",
      short: "o",
      value: "DIR",
      help: "where models write checkpoints and sampler snapshots (default: a new temporary folder, removed when the server stops).",
    },
    faults: {
      type: "string",
      value: "SPEC",
      help: "answer a share of requests with faults, to test clients, e.g. 408:0.1,410:0.05,429:0.1,500:0.1,error:0.05,drop:0.05.",
    },
    seed: { type: "string", value: "N", help: "seed of the faults and of models created without one (default 0)." },
    threads: {
      type: "string",
      value: "N",
      help: "threads of each model's engine (default: the machine's cores); training results are reproducible for a given count.",
    },
    "session-timeout": {
      type: "string",
      value: "SECONDS",
      help: "a Tinker or Weaver session that sends no heartbeat (nor a request for its models) for SECONDS expires: its models and sampling sessions are unloaded, and later requests for them get 410 (default 300, 30 of the Tinker SDK's 10 s heartbeats and 10 of Weaver's 30 s ones; 0: never). Each expiry is logged with what it freed.",
    },
    "memory-budget": {
      type: "string",
      value: "MB",
      help: "most memory, in MB of 2^20 bytes, that the Tinker and Weaver models and sampling sessions may reserve together, each engine counted at the storage it allocates; a new one past it gets 503 memory_budget_exceeded instead of the server running out of memory (default: 75% of the machine's memory, or of the container's limit; 0: no budget). The --model runs are not counted and never expire.",
    },
    "api-key": {
      type: "string",
      value: "KEY",
      help: "every request but /health must carry KEY in X-API-Key, X-WEAVER-API-KEY or Authorization: Bearer (else 401). The environment variable NEXRL_SERVE_API_KEY sets it without showing it in the process list.",
    },
    insecure: { type: "boolean", help: "serve a non-loopback --host without an API key." },
    "tinker-flag": {
      type: "string",
      multiple: true,
      value: "KEY=VALUE",
      help: "a flag the Tinker protocol's client/config answers (repeatable), e.g. proto_write_fwdbwd=true (SDK 0.19-0.24 then write protobuf), pjwt_auth_enabled=true (JWTs from /api/v1/auth/token), or use_pyqwest_transport=false (the SDK uses httpx's transport).",
    },
    model: {
      type: "string",
      multiple: true,
      value: "RUN_DIR[:STEP]",
      help: 'also serve a local run\'s weights (its latest checkpoint, or STEP) on /v1/completions, /v1/chat/completions, /v1/responses and /v1/messages as model "<run>:<step>"; repeat for more runs.',
    },
    "allow-host": {
      type: "string",
      multiple: true,
      value: "NAME",
      help: "also answer requests addressed to NAME (a proxy's or container's host name; repeatable). Others get 403, so that no web page can point its own name at this machine and read the answers.",
    },
    cors: {
      type: "string",
      multiple: true,
      value: "ORIGIN",
      help: "serve browser requests from the web page origin ORIGIN (e.g. http://localhost:3000, or *), with CORS headers; repeatable. Other cross-origin requests get 403, and bodies must be JSON or protobuf.",
    },
  },
  examples: ["nexrl serve --port 8000", "nexrl serve --protocol openai --model runs/pig_latin"],
  notes: [
    "The server stops on Ctrl-C or SIGTERM (exit 0). A --host that is not this machine's exits 2; a port in use or a privileged port exits 3.",
  ],
};

const worker: CommandSpec = {
  name: "worker",
  summary:
    "run the rollouts of a run whose recipe sets rollout_worker.distributed: takes tasks from its Redis server until stopped (SIGTERM or Ctrl-C hands back the tasks in flight and exits 0). The recipe must be the driver's: a worker whose model, worker class or module, or nexrl version differs exits 3 naming each difference.",
  usage: ["worker -c RECIPE [--redis URL] [--concurrency N] [--name NAME] [--verbose] [key.path=value ...]"],
  options: {
    "train-config": {
      ...RECIPE,
      help: "the run's recipe: the worker loads its rollout worker (and agent). Alias: --config.",
    },
    config: CONFIG_ALIAS,
    redis: {
      type: "string",
      value: "URL",
      help: "the Redis server (default: rollout_worker.distributed.url); redis://[[user]:password@]host[:port][/db], rediss:// for TLS.",
    },
    concurrency: { type: "string", value: "N", help: "rollouts at once (default: rollout_worker.num_workers)." },
    name: { type: "string", value: "NAME", help: "the worker's name in the driver's metrics (default: host-pid)." },
    verbose: VERBOSE,
  },
  positionals: [OVERRIDES],
  examples: ["nexrl worker -c examples/distributed/recipe.yaml --redis redis://127.0.0.1:6379 --concurrency 8"],
};

const report: CommandSpec = {
  name: "report",
  summary:
    "write a run folder's report: one HTML file (summary, a chart per metric, rollouts token by token, checkpoints, configuration).",
  usage: [
    "report RUN_DIR [--output report.html] [--open]",
    "       [--watch [--port PORT] [--interval MS] [--allow-host NAME ...] [--cors ORIGIN ...]]",
  ],
  options: {
    output: { type: "string", value: "FILE", help: "the HTML file (default: RUN_DIR/report.html)." },
    open: { type: "boolean", help: "open it in the browser (xdg-open, open or start)." },
    watch: {
      type: "boolean",
      short: "w",
      help: "serve the report on 127.0.0.1 instead, redrawn as the run writes more, until Ctrl-C.",
    },
    port: { type: "string", value: "PORT", help: "--watch's port (default: a free one, printed)." },
    interval: { type: "string", value: "MS", help: "--watch's time between checks (default 2000)." },
    "allow-host": {
      type: "string",
      multiple: true,
      value: "NAME",
      help: "--watch: also answer requests addressed to NAME (a proxy's or container's host name; repeatable). Others get 403, so that no web page can point its own name at this machine and read the answers.",
    },
    cors: {
      type: "string",
      multiple: true,
      value: "ORIGIN",
      help: "--watch: serve browser requests from the web page origin ORIGIN (e.g. http://localhost:3000, or *), with CORS headers; repeatable. Other cross-origin requests get 403, and bodies must be JSON or protobuf.",
    },
  },
  positionals: [["RUN_DIR", "the run folder (the --output-dir or runs/<TAG> of a run)."]],
  examples: ["nexrl report runs/pig_latin --open", "nexrl report runs/pig_latin --watch"],
  nearShorts: { o: "output" },
};

const sample: CommandSpec = {
  name: "sample",
  summary:
    "sample from a run's trained weights (the latest checkpoint, or STEP); prompts from PROMPT or standard input, one per line.",
  usage: [
    "sample RUN_DIR[:STEP] [PROMPT] [--chat] [-n N] [--temperature T] [--max-tokens M]",
    "       [--logprobs] [--json] [--seed N]",
  ],
  options: {
    chat: { type: "boolean", help: "send each prompt as a user message through the chat template." },
    n: { type: "string", short: "n", value: "N", help: "completions per prompt (default 1)." },
    temperature: {
      type: "string",
      value: "T",
      help: "0 is greedy (default: the recipe's rollout_worker.temperature).",
    },
    "max-tokens": {
      type: "string",
      value: "M",
      help: "most tokens per completion (default: the recipe's rollout_worker.max_response_length, else 256).",
    },
    logprobs: { type: "boolean", help: "print each generated token with its logprob." },
    json: { type: "boolean", help: "one JSON object per completion (prompt, text, tokens, logprobs)." },
    seed: { type: "string", value: "N", help: "sampling seed." },
  },
  positionals: [
    ["RUN_DIR[:STEP]", "the run folder, and a checkpoint's step (default: the latest)."],
    ["PROMPT", "the prompt (quote it); without it, prompts are read from standard input, one per line."],
  ],
  examples: [
    'nexrl sample runs/pig_latin "translate: hello world" --temperature 0',
    "nexrl sample runs/pig_latin:20 --chat -n 4 < prompts.txt",
  ],
  nearShorts: { t: "temperature", m: "max-tokens" },
};

const exportCommand: CommandSpec = {
  name: "export",
  summary:
    "write a local run's trained model (the latest checkpoint, or STEP) in Hugging Face's GPT-2 format, for transformers and vLLM, and as GGUF, for llama.cpp, Ollama, LM Studio and node-llama-cpp.",
  usage: [
    "export RUN_DIR[:STEP] [--format hf|gguf|both] [--output DIR]",
    "export RUN_DIR[:STEP]|tinker://PATH --format peft [--base-model NAME] [--merge BASE_DIR] [--output DIR]",
  ],
  options: {
    format: {
      type: "string",
      value: "FORMAT",
      help: "hf (config.json, model.safetensors, tokenizer.json, tokenizer_config.json), gguf (model.gguf: GGUF v3, F32, with the tokenizer and chat template) or both (the default) for a local run; peft (adapter_config.json, adapter_model.safetensors: the LoRA adapter, for peft and vLLM's --lora-modules) for a run on Tinker or a tinker:// path (the default for a path), downloaded from the service (TINKER_API_KEY).",
    },
    "base-model": {
      type: "string",
      value: "NAME",
      help: "peft only: base_model_name_or_path written into adapter_config.json (default: the one the checkpoint names).",
    },
    merge: {
      type: "string",
      value: "BASE_DIR",
      help: "peft only: also merge the adapter into the Hugging Face model in BASE_DIR (safetensors, F32 or BF16, kept in its dtype; tensor by tensor), written to OUTPUT/merged.",
    },
    output: {
      type: "string",
      value: "DIR",
      help: "the folder to write the files into (default: RUN_DIR/export/step_NNNNNN, step_NNNNNN-peft for peft).",
    },
  },
  positionals: [
    ["RUN_DIR[:STEP]", "the run folder, and a checkpoint's step (default: the latest); or a tinker:// path (peft)."],
  ],
  examples: [
    "nexrl export runs/pig_latin",
    "nexrl export runs/pig_latin:20 --format gguf --output pig-latin-gguf",
    "nexrl export runs/pig_latin_tinker --format peft --base-model Qwen/Qwen3-8B --output adapter",
  ],
  nearShorts: { o: "output" },
};

const checkpoints: CommandSpec = {
  name: "checkpoints",
  summary:
    "list, delete or download the Tinker checkpoints of a run (those its run states recorded) or at tinker:// paths, on the run's service (the recipe's base_url, else TINKER_BASE_URL; key from TINKER_API_KEY).",
  usage: [
    "checkpoints list [RUN_DIR[:STEP]|tinker://PATH ...]",
    "checkpoints delete|download RUN_DIR[:STEP]|tinker://PATH ... [--output DIR]",
  ],
  options: {
    output: {
      type: "string",
      value: "DIR",
      help: "download only: the folder to extract each archive into, in a subfolder per checkpoint (default: the current directory).",
    },
  },
  positionals: [
    ["ACTION", "list (without a target: every checkpoint of the key), delete or download (the archive, extracted)."],
    ["TARGET", "a run folder on the tinker backend (all its checkpoints, or STEP's), or a tinker:// path."],
  ],
  examples: [
    "nexrl checkpoints list runs/pig_latin_tinker",
    "nexrl checkpoints download runs/pig_latin_tinker:20 --output weights",
    "nexrl checkpoints delete tinker://RUN_ID/weights/step_000010",
  ],
  nearShorts: { o: "output" },
};

/** Every command, the NexRL form last. */
export const COMMANDS: readonly CommandSpec[] = [
  train,
  validate,
  serve,
  worker,
  report,
  sample,
  exportCommand,
  checkpoints,
  nexrl,
];

/** The command words (`train`, `validate`, …). */
export const COMMAND_NAMES: readonly string[] = COMMANDS.filter((c) => c.name !== "nexrl").map((c) => c.name);

/** The spec of `name` (`nexrl` for NexRL's form). */
export function commandSpec(name: string): CommandSpec {
  const spec = COMMANDS.find((c) => c.name === name);
  if (!spec) throw new Error(`no command ${name}`);
  return spec;
}
