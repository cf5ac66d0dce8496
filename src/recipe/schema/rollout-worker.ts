/**
 * `rollout_worker:` and `trajectory_pool:` — who produces trajectories and how they are batched
 * (inventory §2.3–2.5).
 * @module
 */
import { z } from "zod";
import { nonEmpty, nonNegativeInt, positiveInt, refuse } from "./common.js";
import { judgeSchema } from "./judge.js";
import { RENDERER_IDS } from "../../wire/tokenizer.js";

/** Built-in rollout worker types, plus `custom` for a user class. */
export const ROLLOUT_WORKER_TYPES = [
  "pig_latin",
  "preference",
  "sft",
  "single_turn_math",
  "simple",
  "agent",
  "nexau",
  "custom",
] as const;

/** The workers that build their training trajectories from the rows without sampling. */
const NON_SAMPLING_WORKERS: readonly string[] = ["pig_latin", "preference", "sft"];

/** Shape of `rollout_worker.sft:`, the options of the `sft` worker (every key has a default). */
export const sftOptionsSchema = z.strictObject({
  /**
   * Which assistant messages of a `messages` row are trained when they have no `weight`:
   * `all_assistant_messages` (OpenAI's fine-tuning default) or `last_assistant_message`. A message's
   * `weight` (0 or 1) overrides it; a `prompt`/`completion` row trains its completion either way.
   */
  train_on: z.enum(["all_assistant_messages", "last_assistant_message"]).default("all_assistant_messages"),
});

/** Shape of `rollout_worker.reward_model:`, the trained reward model of `agent.math.judge_mode: reward_model`. */
export const rewardModelSchema = z.strictObject({
  /**
   * Sampler path of the reward model's weights on the run's training service: a
   * `remote_api_reward_model` run's last sampler snapshot (the `sampler.path` of its checkpoint;
   * on the local backend a file such as `runs/rm/sampler_weights/step_000200.nxw`, relative to
   * the current folder). The reward of an answer is the model's score r(x, y) (see
   * `RewardModelScorer`). Checked before the first rollout: `nexrl validate` and the run load a
   * local file; a remote service opens the sampler when the run connects.
   */
  sampler_path: nonEmpty,
});

/** Shape of `rollout_worker.agent:`, the options of `agent` and `nexau` episodes (every key has a default). */
export const agentOptionsSchema = z.strictObject({
  /** Options of the `single_turn_math` agent. */
  math: z
    .strictObject({
      /**
       * How answers are judged: `rule` (the extracted answer equals the ground truth), `llm_judge`
       * (the judge of `rollout_worker.judge` scores every answer), `rule+llm_judge` (a rule
       * match scores 1, any other answer gets the judge's score), or `reward_model` (the trained
       * reward model of `rollout_worker.reward_model` scores every answer; no ground truth needed).
       */
      judge_mode: z.enum(["rule", "llm_judge", "rule+llm_judge", "reward_model"]).default("rule"),
    })
    .prefault({}),
  /** Most model calls per episode; the next call is refused and the episode is truncated. */
  max_turns: positiveInt.default(16),
  /** Most tokens sampled per episode (all calls together); unset for no limit besides `max_response_length` per call. */
  max_tokens: positiveInt.optional(),
  /** Seconds an episode may run before it is cut short (truncated); 0 for no limit. */
  timeout_seconds: z.number().min(0).default(0),
  /** Reward of a truncated episode; null keeps the evaluator's. */
  truncated_reward: z.number().nullable().default(0),
  /** Loss weight of each trajectory of an episode: `inverse_count` (1 / trajectories in the episode, so long episodes do not dominate) or `one`. */
  trajectory_weight: z.enum(["inverse_count", "one"]).default("inverse_count"),
  /**
   * How an answer the agent sends back unchanged is rendered: `tokens` splices in the sampled
   * tokens (the prompt continues token for token); `text` renders the text through the chat
   * template as a server would, so that templates which rewrite earlier turns show up as prefix breaks.
   */
  replay_answers: z.enum(["tokens", "text"]).default("tokens"),
  /** Offer tasks to agents in other processes (`POST /tasks/claim`, `POST /trajectories`) instead of running an agent in-process. */
  external: z.boolean().default(false),
  /** Where the agent gateway listens. */
  gateway: z
    .strictObject({
      /** Interface to bind; keep 127.0.0.1 unless agents run on other machines. */
      host: nonEmpty.default("127.0.0.1"),
      /** Port; 0 picks a free one (external agents need a fixed one). */
      port: nonNegativeInt.max(65535).default(0),
      /**
       * More host names agents may address the gateway by (a container's name for this machine);
       * requests naming any other host get 403, so that no web page can rebind its name to it.
       */
      allowed_hosts: z.array(nonEmpty).default([]),
      /** Web page origins (`http://localhost:3000`, or `*`) whose requests are served, with CORS headers; others get 403. */
      cors: z
        .array(
          z
            .string()
            .refine(
              (o) => o === "*" || (URL.canParse(o) && new URL(o).origin === o.replace(/\/+$/, "")),
              "an origin such as http://localhost:3000 (scheme, host and port only), or *",
            ),
        )
        .default([]),
    })
    .prefault({}),
});

/** The URL schemes of a Redis server: plain TCP and TLS. */
const REDIS_SCHEMES = new Set(["redis:", "rediss:"]);

/**
 * Shape of `rollout_worker.distributed:`: rollouts run by `nexrl worker` processes on any
 * machines, through Redis Streams, instead of in this process.
 */
export const distributedSchema = z
  .strictObject({
    /** The queue the tasks go through; Redis Streams with consumer groups is the only one. */
    engine: z.enum(["redis"]),
    /**
     * The Redis server, `redis://[[user]:password@]host[:port][/db]` (`rediss://` for TLS). The
     * password never appears in logs, errors or printed recipes.
     */
    url: nonEmpty.refine(
      (url) => {
        try {
          return REDIS_SCHEMES.has(new URL(url).protocol);
        } catch {
          return false;
        }
      },
      { message: "not a Redis URL: write redis://[[user]:password@]host[:port][/db] (rediss:// for TLS)" },
    ),
    /** Prefix of every Redis key of the run (streams, consumer group, worker heartbeats): runs sharing a server need different ones. */
    stream_prefix: nonEmpty.regex(/^[^\s]+$/, "no spaces").default("nexrl"),
    /**
     * Milliseconds a task's worker may go without a heartbeat before another worker claims the task
     * (its worker is taken for dead); at least twice `heartbeat_ms`. Rollouts may take longer: each
     * heartbeat keeps the worker's tasks its own.
     */
    claim_idle_ms: positiveInt.default(60_000),
    /** Deliveries of a task without a result (its workers died or were stopped) before it counts as a failed attempt under the failure policy. */
    max_deliveries: positiveInt.default(3),
    /** Milliseconds between a worker's heartbeats; a worker missing three is no longer counted alive. */
    heartbeat_ms: positiveInt.default(2_000),
    /**
     * Where the driver serves its sampler to the workers (rollouts that sample call it over HTTP).
     * Keep `127.0.0.1` when every worker runs on this machine; set this machine's address (or
     * `0.0.0.0` with `inference.public_host`) when they run on others.
     */
    inference: z
      .strictObject({
        /** Interface to bind. */
        host: nonEmpty.default("127.0.0.1"),
        /** Port; 0 picks a free one. */
        port: nonNegativeInt.max(65535).default(0),
        /** The host workers connect to, when it differs from `host` (for example `host: 0.0.0.0`). */
        public_host: nonEmpty.optional(),
      })
      .prefault({}),
  })
  .superRefine((settings, ctx) => {
    if (settings.claim_idle_ms < 2 * settings.heartbeat_ms)
      refuse(
        ctx,
        ["claim_idle_ms"],
        `${settings.claim_idle_ms} ms is less than twice heartbeat_ms (${settings.heartbeat_ms} ms): the tasks of live workers would be claimed between their heartbeats; raise claim_idle_ms or lower heartbeat_ms`,
      );
  });

/** Shape of `rollout_worker:`. */
export const rolloutWorkerSchema = z
  .strictObject({
    /** Which worker runs the rollouts; `custom` loads `custom_rollout_worker_class_name` from `custom_rollout_worker_module_path`. */
    type: z.enum(ROLLOUT_WORKER_TYPES),
    /** Rollouts run concurrently. */
    num_workers: positiveInt.default(4),
    /** Whether the worker samples from the inference service; defaults to true for every type but `pig_latin`, `preference` and `sft`. */
    need_llm_inference: z.boolean().optional(),
    /** Sampling temperature. */
    temperature: z.number().min(0).default(1),
    /** The longest prompt, in tokens, that `max_sequence_length` must leave room for (defaults to `data.max_prompt_length`; `data.filter_prompts` drops longer prompts). */
    max_prompt_length: positiveInt.optional(),
    /** Most tokens sampled per response. */
    max_response_length: positiveInt.default(1024),
    /** Longest trajectory (prompt + response); longer ones are truncated and get reward 0. */
    max_sequence_length: positiveInt.optional(),
    /** Tokenizer (a model name or a `tokenizer.json` path); defaults to the inference model's. */
    tokenizer: z.string().nullable().optional(),
    /**
     * Render chats with nexrl's renderer of this model family (`llama3`: Llama 3.1–3.3 with tools;
     * `gpt_oss`: Harmony) instead of the tokenizer's chat template. Unset, a renderer is used only
     * where the template is missing (gpt-oss) or has no tools (a basic Llama 3 template).
     */
    chat_renderer: z.enum(RENDERER_IDS).nullable().optional(),
    /** Built-in agent of an `agent` worker (NexRL's `single_turn_math`); leave it out to run `agent_module_path`. */
    agent_cls: z.enum(["single_turn_math"]).optional(),
    /**
     * Agent of an `agent` worker, as `path/to/agent.ts` (default export) or `path/to/agent.ts:name`:
     * an async function `(task, { openai, baseURL, model, signal }) => result`, or a class with
     * `run(task, context)`. It talks to the policy through the agent gateway. `null` unsets it
     * (to switch a composed recipe to another agent).
     */
    agent_module_path: nonEmpty.nullish(),
    /** Options of the `sft` worker. */
    sft: sftOptionsSchema.optional(),
    /** Options of the `agent` and `nexau` workers' episodes. */
    agent: agentOptionsSchema.optional(),
    /** NexAU agent YAML (`nexau` worker). */
    nexau_agent_config_path: nonEmpty.optional(),
    /** Evaluator class as `path/to/file.ts:ClassName` (`nexau` worker). */
    evaluator_module_path: nonEmpty.optional(),
    /** Folder of the agent's tools (`nexau` worker). */
    nexau_agent_workspace: nonEmpty.optional(),
    /** Name of the task, used in traces and metrics. */
    task_name: nonEmpty.optional(),
    /** NexRL's trace files: not available (samples.jsonl records agent episodes turn by turn); only `false` is accepted. */
    save_trace: z.boolean().default(false),
    /** NexRL's folder of trace files: refused when set, as `save_trace` is. */
    trace_path: nonEmpty.optional(),
    /** Merge an agent's consecutive calls into one trajectory when their token histories are continuous; `false` makes a trajectory of each call. */
    enable_trace_prefix_merge: z.boolean().default(true),
    /** File of a user rollout worker class (TypeScript needs no build step); read only when `type` is `custom`. */
    custom_rollout_worker_module_path: nonEmpty.optional(),
    /** Exported class name in `custom_rollout_worker_module_path`. */
    custom_rollout_worker_class_name: nonEmpty.default("CustomRolloutWorker"),
    /**
     * Options of a custom worker (`type: custom`), given to it as `this.options`, checked by the
     * class's `optionsSchema` when it has one; refused for the built-in workers.
     */
    options: z.record(z.string(), z.unknown()).optional(),
    /**
     * Seconds one rollout may take before it counts as failed (and its worker instance is
     * replaced); 0 for no limit. A rollout that can never finish (nothing left to wait for) fails
     * at once, whatever this says.
     */
    rollout_timeout_seconds: z.number().min(0).default(3600),
    /** Times a failed rollout is retried before `runtime_monitor.exception_handling.policy` applies. */
    max_rollout_retries: nonNegativeInt.default(0),
    /** The LLM judge of `agent.math.judge_mode: llm_judge` or `rule+llm_judge` (math worker only). */
    judge: judgeSchema.optional(),
    /** The reward model of `agent.math.judge_mode: reward_model` (math worker only). */
    reward_model: rewardModelSchema.optional(),
    /** NexRL's Kubernetes agent pods: accepted only with `num_workers: 0` (agents run in this process, or as external agents). */
    resource: z
      .strictObject({
        /** Agent pods. */
        num_workers: nonNegativeInt.optional(),
        /** Agents per pod. */
        agents_per_worker: positiveInt.optional(),
      })
      .optional(),
    /** Run rollouts on `nexrl worker` processes through Redis instead of in this process (`nexrl worker --help`). */
    distributed: distributedSchema.optional(),
  })
  .superRefine((worker, ctx) => {
    if (worker.type === "custom" && worker.custom_rollout_worker_module_path === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["custom_rollout_worker_module_path"],
        message: "required when `type` is `custom`: the file that exports your rollout worker class",
      });
    }
    if (worker.type === "nexau") {
      for (const key of ["nexau_agent_config_path", "evaluator_module_path"] as const) {
        if (worker[key] === undefined)
          ctx.addIssue({ code: "custom", path: [key], message: "required when `type` is `nexau`" });
      }
    }
    const sources: string[][] = [
      ...(worker.agent_module_path != null ? [["agent_module_path"]] : []),
      ...(worker.nexau_agent_config_path !== undefined ? [["nexau_agent_config_path"]] : []),
      ...(worker.agent?.external ? [["agent", "external"]] : []),
    ];
    if ((worker.type === "agent" || worker.type === "nexau") && sources.length > 1) {
      const names = sources.map((path) => path.join(".")).join(", ");
      ctx.addIssue({
        code: "custom",
        path: sources[1]!,
        message: `a \`${worker.type}\` worker runs one agent: give one of agent_module_path, nexau_agent_config_path and agent.external (got ${names})`,
      });
    }
    if (worker.type === "agent" && worker.agent_cls !== undefined && sources.length > 0) {
      ctx.addIssue({
        code: "custom",
        path: ["agent_cls"],
        message: `agent_cls runs a built-in agent; leave it out to run ${sources[0]!.join(".")}`,
      });
    }
    const judgeMode = worker.agent?.math.judge_mode ?? "rule";
    const mathWorker =
      worker.type === "single_turn_math" ||
      (worker.type === "agent" && (worker.agent_cls !== undefined || sources.length === 0));
    if (judgeMode !== "rule" && !mathWorker)
      refuse(
        ctx,
        ["agent", "math", "judge_mode"],
        `\`${judgeMode}\`: only the math worker (\`single_turn_math\`, or \`agent\` with its built-in agent) judges answers, and this worker is \`${worker.type}\`; use \`rule\` (or remove it)`,
      );
    else if (judgeMode === "reward_model") {
      if (worker.reward_model === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["reward_model"],
          message:
            "required when `agent.math.judge_mode` is `reward_model`: the reward model's `sampler_path` (a `remote_api_reward_model` run's sampler snapshot)",
        });
      if (worker.judge !== undefined)
        refuse(
          ctx,
          ["judge"],
          "read only by the `llm_judge` modes; `reward_model` scores with rollout_worker.reward_model; remove it",
        );
    } else if (judgeMode !== "rule" && worker.judge === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["judge"],
        message: `required when \`agent.math.judge_mode\` is \`${judgeMode}\`: the judge's base_url and model (and api_key_env when it needs a key)`,
      });
    if (judgeMode !== "reward_model" && worker.reward_model !== undefined)
      refuse(
        ctx,
        ["reward_model"],
        "read only when `agent.math.judge_mode` is `reward_model` (math worker only): set it, or remove the reward model",
      );
    if (judgeMode === "rule" && worker.judge !== undefined)
      refuse(
        ctx,
        ["judge"],
        "read only when `agent.math.judge_mode` is `llm_judge` or `rule+llm_judge`: set one of them, or remove the judge",
      );
    if (worker.sft !== undefined && worker.type !== "sft")
      refuse(
        ctx,
        ["sft"],
        `read only by the \`sft\` worker, and this worker is \`${worker.type}\`: remove it, or set \`type: sft\``,
      );
    if (worker.save_trace)
      refuse(
        ctx,
        ["save_trace"],
        "trace files are not available: samples.jsonl records agent episodes turn by turn, with each call's tokens (`nexrl report` shows them); remove it",
      );
    if (worker.trace_path !== undefined)
      refuse(
        ctx,
        ["trace_path"],
        "trace files are not available (see save_trace), so nothing would be written there; remove it",
      );
    if (worker.resource !== undefined && worker.resource.num_workers !== 0)
      refuse(
        ctx,
        ["resource"],
        "nexrl runs no agent pods: agents run in this process (rollout_worker.num_workers at once) or connect as external agents (rollout_worker.agent.external); remove rollout_worker.resource",
      );
    if (worker.type !== "custom" && worker.custom_rollout_worker_module_path !== undefined)
      refuse(
        ctx,
        ["custom_rollout_worker_module_path"],
        `read only when \`type\` is \`custom\`, and this worker is \`${worker.type}\`: remove it, or set \`type: custom\` to run your class`,
      );
    if (worker.type !== "custom" && worker.options !== undefined)
      refuse(
        ctx,
        ["options"],
        `read only by a custom worker (\`type: custom\`), and this worker is \`${worker.type}\`; remove it (the built-in workers' settings are keys of their own, e.g. \`sft\`, \`agent\`)`,
      );
    if (worker.agent?.external && worker.distributed !== undefined)
      refuse(
        ctx,
        ["distributed"],
        "external agents claim their tasks from this process's agent gateway, so no task would reach the `nexrl worker` processes: remove agent.external or distributed",
      );
    if (worker.agent?.external && worker.agent.gateway.port === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["agent", "gateway", "port"],
        message: "external agents need to know where to connect: set a fixed port (e.g. 8765)",
      });
    }
  })
  .transform((worker) => ({
    ...worker,
    /** Whether the worker samples from the inference service (true for every type but `pig_latin`, `preference` and `sft` unless set). */
    need_llm_inference: worker.need_llm_inference ?? !NON_SAMPLING_WORKERS.includes(worker.type),
  }));

/** Why the pool takes no grouping settings of its own. */
export const POOL_GROUPING =
  "the pool does not group trajectories: GRPO groups are the data.rollout_repeat_n rollouts of a task, and a batch releases whole groups";

/** Shape of `trajectory_pool:`. */
export const trajectoryPoolSchema = z
  .strictObject({
    /** NexRL's only pool type. */
    type: z.enum(["default"]).default("default"),
    /** Trajectories per training batch for the `batch_size_reached*` readiness checks. */
    batch_size: positiveInt.default(32),
    /**
     * NexRL's pool grouping: `1` (no grouping in the pool) or `data.rollout_repeat_n`, the grouping
     * nexrl does anyway (GRPO groups are the `data.rollout_repeat_n` rollouts of a task); any other
     * value is refused.
     */
    group_size: positiveInt.default(1),
    /** NexRL's pool grouping by trajectory fields: only `[]` is accepted. */
    key_list: z.array(nonEmpty).default([]),
    /** When a batch is ready for the trainer. */
    check_batch_ready_function: z
      .enum(["loaded_batch_finished", "batch_size_reached", "batch_size_reached_and_loaded_batch_finished"])
      .default("loaded_batch_finished"),
  })
  .superRefine((pool, ctx) => {
    // `group_size` is checked against `data.rollout_repeat_n` with the whole recipe (schema/recipe.ts).
    if (pool.key_list.length > 0) refuse(ctx, ["key_list"], `${POOL_GROUPING}; remove it (or set [])`);
  })
  .prefault({});

/** `rollout_worker.distributed` of a parsed recipe. */
export type DistributedOptions = z.output<typeof distributedSchema>;
