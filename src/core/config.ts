// Run configuration: a YAML file validated with zod. An invalid file fails with the field path and
// the reason (e.g. `rollout.groupSize: must be >= 1`), never with a stack trace.
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { parse as parseYaml, YAMLParseError } from "yaml";
import { z } from "./zod.js";
import { applyOverrides, type ConfigOverride } from "./config-overrides.js";
import { ArborError } from "./errors.js";
import { AdvantageShapingSchema, splitShapingOptions } from "./estimator-options.js";

const positiveInt = z.number().int().min(1);

/** The least sandbox.memoryMb (RLIMIT_AS under bwrap) a black-box agent's launcher, a Node process, starts in. */
export const BLACK_BOX_MIN_MEMORY_MB = 1024;

/** Where `arbor run` serves the trainer protocol to an external trainer (`train.external`). */
export const ExternalTrainerConfigSchema = z
  .object({
    host: z.string().min(1, { error: "must be a host name or address to listen on" }).default("127.0.0.1"),
    /** 0 = any free port (the run prints the URL). */
    port: z.number().int().min(0).max(65535, { error: "must be a TCP port (0-65535; 0 = any free port)" }).default(0),
    /** How long the run waits for the trainer to acknowledge a batch (ms; a requeue restarts the wait) before failing. */
    waitMs: positiveInt.default(600_000),
    /**
     * How long a batch stays with a trainer that neither acks, requeues nor sends a heartbeat (ms): then it goes to
     * another trainer (acked instead, when weights trained on it were announced: its trainer died before its ack).
     */
    leaseMs: positiveInt.default(600_000),
  })
  .strict();

/** The tiny llama-architecture policy to create when no model file is given. */
export const ModelConfigSchema = z
  .object({
    /**
     * Path of an existing GGUF: Arbor's policy, or any model llama.cpp can run (served with its own
     * tokenizer, chat template and stop tokens). When absent, a tiny policy is created from `init`.
     */
    path: z.string().optional(),
    init: z
      .object({
        seed: z.number().int().default(1),
        nEmbd: positiveInt.default(64),
        nLayer: positiveInt.default(2),
        nHead: positiveInt.default(4),
        nHeadKv: positiveInt.default(4),
        nFf: positiveInt.default(192),
        contextLength: z.number().int().min(1024).default(2048),
      })
      .strict()
      .prefault({}),
    /**
     * The vocabulary and chat template of a model created from `init`: `arbor` (the tiny policy's SPM
     * vocabulary, template and tool markup), or a made-here real-style one — `bpe-chatml` (GPT-2-style
     * byte-level BPE, Qwen-like ChatML template with tools, Hermes tool calls) or `spm-llama3`
     * (SentencePiece-style, Llama-3.1-like template, JSON tool calls). Ignored when `path` is given.
     */
    vocab: z.enum(["arbor", "bpe-chatml", "spm-llama3"]).default("arbor"),
  })
  .strict();

/**
 * Tool-call parser names (src/model/tool-parsers/ registry; vLLM's `--tool-call-parser` names). The
 * config layer cannot import the model layer, so the list is written here; a test keeps them equal.
 */
export const TOOL_PARSER_NAMES = ["arbor", "hermes", "llama3_json", "mistral"] as const;
/** Reasoning parser names (src/model/ reasoning registry): `think` splits `<think>…</think>`. */
export const REASONING_PARSER_NAMES = ["think", "none"] as const;

/** One built-in engine instance started in this process. */
export const EngineConfigSchema = z
  .object({
    name: z.string().min(1),
    /** Sequences decoded together in one llama.cpp context (continuous batching width). */
    sequences: positiveInt.default(4),
    /** Context size per sequence, in tokens. */
    contextSize: z.number().int().min(256).default(2048),
    /** Requests that may wait for a free sequence before the engine answers 429. */
    maxWaiting: z.number().int().min(0).default(256),
    port: z.number().int().min(0).max(65535).default(0),
    /**
     * `llamacpp-scheduled`: the vLLM-style scheduler and paged KV manager (prefix caching, chunked
     * prefill, preemption) over llama.cpp; `llamacpp`: v0, one request per sequence, FCFS;
     * `costmodel`: modelled time and random tokens from `costProfile` (gateway load tests).
     */
    executor: z.enum(["llamacpp-scheduled", "llamacpp", "costmodel"]).default("llamacpp-scheduled"),
    /** Cost profile of a `costmodel` engine, e.g. `llama-3-8b/h100`. */
    costProfile: z.string().optional(),
    /**
     * Who draws a `llamacpp` engine's tokens: `arbor` (default), Arbor's sampler over llama.cpp's whole
     * distribution, the tokens the scheduled executor and speculative decoding give for a seed; `llama.cpp`,
     * llama.cpp samples the requests it can sample exactly (temperature 0 or 1, top_p 1, no top logprobs,
     * logit bias or min_tokens), seeded per position, with exact logprobs and no distribution copied per token.
     */
    sampler: z.enum(["arbor", "llama.cpp"], { error: 'must be "arbor" or "llama.cpp"' }).default("arbor"),
    /** On a weight switch (`POST /v1/load_weights`): in-flight requests finish on the old version, are aborted, or resume on the new one. */
    inFlightOnWeightSwitch: z.enum(["finish", "abort", "resume"]).default("finish"),
    /** The `model` name the engine serves (its /v1/models and answers); the gateway sends it whatever name a client uses. */
    servedModelName: z.string().min(1).max(256).default("arbor-tiny"),
    /** llama.cpp build: false = the CPU build (default); "auto" = a GPU build (CUDA, Vulkan, Metal) where one is installed, else CPU. */
    gpu: z.union([z.literal(false), z.literal("auto")], { error: 'must be false (CPU) or "auto" (a GPU build where installed)' }).default(false),
    /** How the model writes tool calls (default: Arbor's markup; e.g. `hermes` for Qwen2.5/Qwen3). */
    toolParser: z.enum(TOOL_PARSER_NAMES, { error: `must be one of ${TOOL_PARSER_NAMES.join(", ")}` }).optional(),
    /** How the model writes reasoning (`think`: `<think>…</think>` becomes reasoning_content; default none). */
    reasoningParser: z.enum(REASONING_PARSER_NAMES, { error: `must be one of ${REASONING_PARSER_NAMES.join(", ")}` }).optional(),
    /**
     * Prefill/decode disaggregation (engine/http/kv-handoff.ts): `prefill` evaluates prompts and hands
     * their KV to decode engines through `kvPool`, `decode` generates from it, `mixed` (default) serves
     * whole requests. Prefill and decode need `kvPool` and the `llamacpp-scheduled` executor.
     */
    role: z.enum(["prefill", "decode", "mixed"], { error: "must be prefill, decode or mixed" }).default("mixed"),
    /**
     * Speculative decoding on a `llamacpp-scheduled` engine (engine/specdec/): drafts from SuffixDecoding's
     * suffix trees (the request's prompt and output, past responses), or a small draft model's greedy
     * proposals (`draft-model`), verified exactly (outputs and logprobs unchanged). Off when absent.
     */
    speculative: z
      .object({
        method: z.enum(["suffix", "draft-model"], { error: 'must be "suffix" or "draft-model"' }),
        /**
         * `draft-model`: the draft GGUF (the policy's vocabulary) served when no `draft-vN.gguf` lies beside the
         * served `policy-vN.gguf`.
         */
        draftModel: z.string().min(1).optional(),
        /** Draft tokens verified per step at most (default 8). */
        maxSpecTokens: positiveInt.optional(),
        /** Pruning threshold on a draft token's estimated probability (default 0.1). */
        minTokenProb: z.number().min(0).max(1).optional(),
        /** A draft is at most matchLen × maxSpecFactor + maxSpecOffset tokens (defaults 1, 0). */
        maxSpecFactor: z.number().min(0).optional(),
        maxSpecOffset: z.number().optional(),
        /** Past responses kept in the engine's global tree (default 10000; 0: per-request trees only). */
        maxCachedResponses: z.number().int().min(0).optional(),
        /** Seer's adaptive budget: draft tokens per step from measured step time and acceptance (default true). */
        adaptive: z.boolean().optional(),
        /**
         * `suffix`: the draft service shared with other engines (an engine's base URL; it serves `/v1/specdec`),
         * so a group's siblings placed on different engines draft each other. Unreachable: local drafts.
         */
        draftService: z
          .object({ url: z.string().regex(/^https?:\/\/[^/]/, { error: "must be an http(s) base URL" }), timeoutMs: positiveInt.optional() })
          .strict()
          .optional(),
      })
      .strict()
      .refine((sp) => sp.draftModel === undefined || sp.method === "draft-model", { path: ["draftModel"], message: 'only with method "draft-model"' })
      .refine((sp) => sp.draftService === undefined || sp.method === "suffix", { path: ["draftService"], message: 'only with method "suffix"' })
      .optional(),
    /** The global KV pool on Redis shared by the engines of a prefill/decode pair (engine/kv/redis-state-pool.ts). */
    kvPool: z
      .object({
        /** e.g. redis://127.0.0.1:6379 */
        url: z.string().regex(/^rediss?:\/\//, { error: "must be a redis:// or rediss:// URL" }),
        /** Byte budget of all states in the pool (the same on every engine of the pool); default 1 GiB. */
        capacityBytes: positiveInt.default(1024 * 1024 * 1024),
        /** Engines with the same pool name share states. */
        name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: "must be 1-64 letters, digits, '-', '_' or '.'" }).default("default"),
      })
      .strict()
      .optional(),
  })
  .strict();

/**
 * How a run's trainer gets new weights onto an external engine, through the engine's own API
 * (src/backends/weights/): `sglang` (POST /update_weights_from_disk, pausing generation where asked),
 * `vllm-reload` (reload the weights from disk through collective_rpc, sleeping around it with `sleepLevel`;
 * the server needs VLLM_SERVER_DEV_MODE=1), `vllm-lora` (a LoRA adapter per version),
 * `llamacpp-restart` (Arbor starts llama-server itself and restarts it on each new GGUF).
 */
export const WeightSyncConfigSchema = z
  .object({
    kind: z.enum(["sglang", "vllm-reload", "vllm-lora", "llamacpp-restart"], { error: "must be one of sglang, vllm-reload, vllm-lora, llamacpp-restart" }),
    /** In-flight calls at a switch: finish on the old weights (drained first), are aborted, or resume on the new ones where the engine can. */
    inFlightOnWeightSwitch: z.enum(["finish", "abort", "resume"]).default("finish"),
    /** Longest wait for one engine request of a switch (load, pause, restart), ms. */
    timeoutMs: positiveInt.default(600_000),
    /** Longest wait for in-flight calls to end before a switch, ms. */
    drainTimeoutMs: positiveInt.default(600_000),
    /** How the engine sees Arbor's checkpoint directory when it runs elsewhere: the prefix `from` of a path becomes `to`. */
    pathMap: z.object({ from: z.string().min(1), to: z.string().min(1) }).strict().optional(),
    /** vllm-reload: sleep level around the reload (1: weights offloaded, KV discarded; 2: both discarded); default no sleep. */
    sleepLevel: z.union([z.literal(1), z.literal(2)], { error: "must be 1 or 2" }).optional(),
    /** sglang: `load_format` of the update (default: the server's). */
    loadFormat: z.string().min(1).optional(),
    /** Name of the environment variable holding the engine's API key (sent as a bearer token to its admin routes). */
    apiKeyEnv: z.string().min(1).optional(),
    /** llamacpp-restart: the llama-server binary (default: $ARBOR_LLAMA_SERVER, else the one scripts/setup.sh --llama-server built). */
    binary: z.string().min(1).optional(),
    /** llamacpp-restart: extra llama-server arguments (e.g. ["-c", "4096", "-np", "4"]). */
    args: z.array(z.string()).default([]),
    /** llamacpp-restart: port it listens on, the same across restarts (0: one chosen at start). */
    port: z.number().int().min(0).max(65535).default(0),
    /** llamacpp-restart: on a restart, drop the slots' KV or save it and restore it into the new process. */
    slots: z.enum(["drain", "save"]).default("save"),
  })
  .strict()
  .superRefine((w, ctx) => {
    if (w.sleepLevel !== undefined && w.kind !== "vllm-reload") ctx.addIssue({ code: "custom", path: ["sleepLevel"], message: "only used with kind: vllm-reload" });
    if (w.loadFormat !== undefined && w.kind !== "sglang") ctx.addIssue({ code: "custom", path: ["loadFormat"], message: "only used with kind: sglang" });
    if (w.kind !== "llamacpp-restart") {
      for (const k of ["binary", "slots"] as const) {
        if (w[k] !== undefined && !(k === "slots" && w.slots === "save")) ctx.addIssue({ code: "custom", path: [k], message: "only used with kind: llamacpp-restart" });
      }
      if (w.args.length > 0 || w.port !== 0) ctx.addIssue({ code: "custom", path: [w.args.length > 0 ? "args" : "port"], message: "only used with kind: llamacpp-restart" });
    }
  });

/**
 * The cost model of a `type: disagg` backend's placement (backends/disagg-placement.ts): queueing delay
 * against the time to move a prompt's KV through the pool. Defined here so the config and the placement
 * share one schema (core is below backends).
 */
export const DisaggCostOptionsSchema = z
  .object({
    /** Expected wait behind each request an engine has in flight, ms. */
    queueMsPerRequest: z.number().min(0).default(50),
    /** Bandwidth of the KV pool, bytes/ms (1 GB/s default). */
    transferBytesPerMs: z.number().gt(0).default(1_000_000),
    /** Fixed cost of one handoff (the pool's round trips), ms. */
    transferLatencyMs: z.number().min(0).default(2),
    /** KV bytes per prompt token until a prefill engine's answer tells the real size. */
    kvBytesPerToken: z.number().min(0).default(32 * 1024),
  })
  .strict();

/** The base URLs of one role's engines in a `type: disagg` backend. */
const engineUrls = (role: string) =>
  z.array(z.url({ protocol: /^https?$/, error: `must be an engine's base URL (e.g. http://${role[0]}0:8101/v1)` })).min(1, { error: `needs at least one engine with role ${role} (its base URL)` });

const DISAGG_FIELDS = ["prefill", "decode", "mixed", "cost"] as const;

/** An inference backend the gateway routes to. */
export const BackendConfigSchema = z
  .object({
    name: z.string().min(1),
    /**
     * `builtin`: an Arbor engine (OpenAI-compatible with token ids). `disagg`: Arbor engines serving
     * prefill/decode roles as one backend (`prefill`, `decode`, optional `mixed`; no `url`).
     */
    type: z.enum(["builtin", "vllm", "sglang", "llamacpp", "openai", "disagg"]),
    /** Base URL (e.g. http://127.0.0.1:8000/v1). Omit for an engine started in-process with the same name. */
    url: z.string().url().optional(),
    /** `type: disagg`: base URLs of Arbor engines with role prefill (and a kvPool), e.g. http://p0:8101/v1. */
    prefill: engineUrls("prefill").optional(),
    /** `type: disagg`: base URLs of Arbor engines with role decode, on the prefill engines' KV pool. */
    decode: engineUrls("decode").optional(),
    /** `type: disagg`: base URLs of Arbor engines with role mixed a call may also run on whole. */
    mixed: engineUrls("mixed").optional(),
    /** `type: disagg`: the placement's cost model (defaults: 50 ms per queued request, 1 GB/s pool, 2 ms per handoff). */
    cost: DisaggCostOptionsSchema.optional(),
    /**
     * The model name the engine serves, sent with every call whatever name the client used (agents
     * name their own models). Default: an in-process engine's `servedModelName`; else the client's name.
     */
    model: z.string().min(1).max(256).optional(),
    /**
     * The served model's tool-call format, by parser name (`arbor`, `hermes`, `llama3_json`,
     * `mistral`): the gateway's token path reads tool calls from the generated ids with it, for
     * every engine type. Default: an in-process engine's `toolParser`, else `arbor` for `builtin`;
     * none for the others, whose tool requests then go through the engine's own chat route.
     */
    toolParser: z.string().min(1).optional(),
    /** The served model's reasoning format (`think`: `<think>…</think>` becomes `reasoning_content`). Default: none. */
    reasoningParser: z.string().min(1).optional(),
    /**
     * `type: vllm` or `builtin`: the served model's GGUF (relative to the working directory), whose tokenizer
     * and chat template the gateway then runs itself, so the token path makes one upstream call per turn
     * instead of three (no /tokenize, /detokenize). Checked against the engine's /tokenize before its first
     * call; a different tokenizer is refused. Default: none (the engine tokenizes).
     */
    tokenizer: z
      .string()
      .min(1)
      .refine((p) => p.endsWith(".gguf"), { message: "must be a .gguf file (the served model's GGUF)" })
      .optional(),
    /** How training's new weights reach this (external) engine; required for every external backend of a run with `train`. */
    weightSync: WeightSyncConfigSchema.optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (b.tokenizer !== undefined && b.type !== "vllm" && b.type !== "builtin") {
      ctx.addIssue({ code: "custom", path: ["tokenizer"], message: "only used with type: vllm or builtin (engines with vLLM's /tokenize to check it against)" });
    }
    if (b.type !== "disagg") {
      for (const k of DISAGG_FIELDS) if (b[k] !== undefined) ctx.addIssue({ code: "custom", path: [k], message: "only used with type: disagg" });
      return;
    }
    if (b.url !== undefined) ctx.addIssue({ code: "custom", path: ["url"], message: "not used with type: disagg (its engines' base URLs go in prefill, decode and mixed)" });
    if (b.prefill === undefined) ctx.addIssue({ code: "custom", path: ["prefill"], message: "required with type: disagg (base URLs of engines with role prefill)" });
    if (b.decode === undefined) ctx.addIssue({ code: "custom", path: ["decode"], message: "required with type: disagg (base URLs of engines with role decode)" });
    if (b.weightSync !== undefined) ctx.addIssue({ code: "custom", path: ["weightSync"], message: "not supported with type: disagg (its engines are Arbor engines, which load weights themselves)" });
    const urls = [...(b.prefill ?? []), ...(b.decode ?? []), ...(b.mixed ?? [])];
    const twice = urls.find((u, i) => urls.indexOf(u) !== i);
    // One engine serves one role: a URL in two lists (or twice in one) would count its load apart.
    if (twice !== undefined) ctx.addIssue({ code: "custom", path: ["prefill"], message: `${twice} is listed twice (one engine serves one role)` });
  });

/** The gateway: where it listens, routing, health checks, auth, limits, divided rollout, pausing (run and cluster files). */
export const GatewayConfigSchema = z
  .object({
    host: z.string().default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(0),
    /**
     * A preset (`least-load`, `kv-usage`, `sticky-program`, `prefix-affinity`, `cost-aware`) or
     * `{filters, scorers: [{name, weight, options}]}`; the gateway validates it (gateway/routing/registry.ts).
     */
    routing: z.union([z.string().min(1), z.record(z.string(), z.unknown())]).default("sticky-program"),
    /** Per-call timeout towards a backend, ms. */
    callTimeoutMs: positiveInt.default(120_000),
    /**
     * A max_tokens larger than the context leaves (the engine's context length minus the prompt's
     * tokens): `clamp` it to what is left, recorded on the call as maxTokensClamped (agent CLIs send
     * their vendor's defaults, 64,000 and more), or `refuse` the call with a 400 naming the field.
     * Calls to a backend without the engine's tokenizer, or one that reports no context length, go as sent.
     */
    maxTokensPolicy: z.enum(["clamp", "refuse"]).default("clamp"),
    /** Backend health checks: in-rotation backends every intervalMs (default 10 s), out-of-rotation ones every recheckMs. */
    health: z
      .object({ intervalMs: positiveInt.default(10_000), recheckMs: positiveInt.default(1000) })
      .strict()
      .prefault({}),
    /**
     * Require credentials: every program calls with its own key, admin endpoints with the admin
     * token, read from the environment variable named here (secrets stay out of config files).
     */
    auth: z
      .object({
        adminTokenEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "must be an environment variable name").default("ARBOR_ADMIN_TOKEN"),
        requireProgramKeys: z.boolean().default(true),
      })
      .strict()
      .optional(),
    /** Per-program limits; beyond them the gateway answers 429. */
    limits: z
      .object({
        maxInFlightPerProgram: positiveInt.optional(),
        requestsPerSecond: z.number().positive().optional(),
        burst: positiveInt.optional(),
      })
      .strict()
      .optional(),
    /**
     * Seer divided rollout (gateway/divided/): token-level generations go out in chunks of at most
     * chunkTokens, each on the backend with the most free KV, continuing from the tokens so far.
     */
    dividedRollout: z
      .object({
        chunkTokens: positiveInt,
        /** Chunks one generation may take (default 4096); a max_tokens needing more is refused. */
        maxChunks: positiveInt.optional(),
      })
      .strict()
      .optional(),
    /**
     * ThunderAgent state-aware pause/restore (gateway/pausing/pause-gate.ts): pause programs when a
     * backend's KV passes lambdaMax·C, restore below lambdaMin·C, with the engine's own
     * pause/restore where the backend has one, else by holding calls at the gateway.
     */
    pausing: z
      .object({
        enabled: z.boolean().default(false),
        lambdaMax: z.number().positive().default(1),
        lambdaMin: z.number().positive().default(1),
        /** Scheduling period Δt, ms. */
        tickMs: positiveInt.default(5000),
        /** A call held longer than this is resumed whatever the capacity, ms. */
        forceResumeMs: positiveInt.default(1_800_000),
        /** Calls held at the gateway at once; beyond it calls are refused (429). */
        maxHeldCalls: z.number().int().min(0).default(10_000),
        /** `most-free` (ThunderAgent), `best-fit` (textbook BFD) or `origin` (only back on the backend that paused it, waiting for room there) placement of restored programs. */
        restorePacking: z.enum(["most-free", "best-fit", "origin"]).default("most-free"),
        /** Tokens reserved per active program for decode headroom. */
        bufferPerProgram: z.number().int().min(0).default(100),
        /** KV capacity in tokens by backend name, for backends whose metrics do not report it. */
        capacities: z.record(z.string(), positiveInt).optional(),
      })
      .strict()
      .refine((p) => p.lambdaMin <= p.lambdaMax, { message: "lambdaMin must be <= lambdaMax", path: ["lambdaMin"] })
      .prefault({}),
  })
  .strict();

/** Options of the reward functions (src/reward/), by function name. */
export const RewardOptionsSchema = z
  .object({
    process: z
      .object({
        malformedToolCall: z.number().min(0).optional(),
        failedToolCall: z.number().min(0).optional(),
        languageMix: z.number().min(0).optional(),
        floor: z.number().max(0).optional(),
        languageMixThresholds: z
          .object({ minLetters: z.number().int().min(1).optional(), minFraction: z.number().min(0).max(1).optional() })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
    "completion-time": z.object({ minOutcome: z.number().optional() }).strict().optional(),
    judge: z
      .object({
        model: z.string().min(1),
        rubric: z.string().optional(),
        maxAttempts: z.number().int().min(1).max(10).optional(),
        maxTokens: positiveInt.optional(),
        temperature: z.number().min(0).max(5).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/**
 * A custom reward: a module path relative to the config file with `#export` (a function scoring a finished
 * program, or a RewardFn object), its component name (default: the export's name in kebab-case) and weight.
 */
const CustomRewardSpecSchema = z
  .object({
    module: z.string().min(1),
    name: z.string().regex(/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/, "must be kebab-case, e.g. 'tool-success'").optional(),
    weight: z.number().default(1),
  })
  .strict();
const CustomRewardsSchema = z
  .union([z.string().min(1), CustomRewardSpecSchema, z.array(z.union([z.string().min(1), CustomRewardSpecSchema])).min(1)])
  .transform((v) => (Array.isArray(v) ? v : [v]).map((x) => (typeof x === "string" ? { module: x, weight: 1 } : x)));

export const RunConfigSchema = z
  .object({
    name: z.string().min(1).default("run"),
    seed: z.number().int().default(1),
    model: ModelConfigSchema.prefault({}),
    engines: z.array(EngineConfigSchema).default([]),
    backends: z.array(BackendConfigSchema).default([]),
    gateway: GatewayConfigSchema.prefault({}),
    env: z
      .object({
        name: z.enum(["calc", "swe-mini", "search-qa"]).default("calc"),
        /**
         * Your own environment instead of `name`: a module path relative to this file, `#export` to take a named
         * export (default: the default export), an Environment or a factory returning one (envs/from-config.ts).
         */
        module: z.string().min(1).optional(),
        /**
         * A count: tasks per iteration drawn from the environment. A path (relative to this file): the tasks of a
         * `.jsonl` or `.parquet` file (`arbor validate`'s filtered output included), or for swe-mini a task folder.
         */
        tasks: z.union([positiveInt, z.string().min(1)]).default(8),
        /** With a task file: tasks per iteration (default: the whole file), wrapping around at its end. */
        perIteration: positiveInt.optional(),
        seed: z.number().int().default(7),
        /** Hygiene (ROLL): zero the reward of, or stop, a program that reads or writes grader paths. */
        hygiene: z
          .object({ zeroRewardOnViolation: z.boolean().default(true), stopOnViolation: z.boolean().default(false) })
          .strict()
          .optional(),
      })
      .strict()
      .refine((e) => e.perIteration === undefined || typeof e.tasks === "string", { message: "perIteration needs a task file (env.tasks: <path>)", path: ["perIteration"] })
      .prefault({}),
    rollout: z
      .object({
        groupSize: positiveInt.default(4),
        /** Programs running at once. */
        concurrency: positiveInt.default(8),
        /**
         * `sync`: an iteration's groups all finish, then the batch; `async`: rollout never stops and
         * the trainer takes completed groups from the window (rollout/orchestrator/).
         */
        mode: z.enum(["sync", "async"]).default("sync"),
        /** Groups per training batch (B); default: every task's group in one batch. */
        batchGroups: positiveInt.optional(),
        /**
         * Rollout scheduling policy (rollout/scheduling/registry.ts). `oracle-lfs` needs true output
         * lengths, which only simulated workloads have.
         */
        scheduler: z
          .object({
            policy: z.enum(["fifo-group", "seer", "oracle-lfs"]).default("fifo-group"),
            /** Divided rollout chunk, tokens (seer, oracle-lfs); default: no division. */
            chunkTokens: positiveInt.optional(),
            /** A request ready this long (ms) is served first. */
            starvationMs: positiveInt.optional(),
            /** Keep a continuation on its previous chunk's instance when it has room. */
            kvAffinity: z.boolean().default(true),
          })
          .strict()
          .prefault({}),
        /** Async: unconsumed groups at most (Forge's N); default 2·batchGroups. */
        maxInFlightGroups: positiveInt.optional(),
        /** Async: Forge window W, groups (default N): completed groups the trainer may take among the W oldest. */
        window: positiveInt.optional(),
        /** Async: AReaL staleness bound η (0 = synchronous admission); absent = unbounded. */
        maxStaleness: z.number().int().min(0).optional(),
      })
      .strict()
      .refine((r) => r.mode === "async" || (r.window === undefined && r.maxInFlightGroups === undefined && r.maxStaleness === undefined), {
        message: "window, maxInFlightGroups and maxStaleness apply to mode async only",
        path: ["mode"],
      })
      .prefault({}),
    agent: z
      .object({
        maxTurns: positiveInt.default(4),
        maxTokensPerCall: positiveInt.default(64),
        maxTotalTokens: positiveInt.default(512),
        temperature: z.number().min(0).max(5).default(1),
        /**
         * Context management as an action (agents/context/): `{name: none}`, `{name: discard-all,
         * threshold, window}`, `{name: clear-thinking}` or `{name: summarize, ...}`; each change is recorded.
         */
        context: z.record(z.string(), z.unknown()).optional(),
        /**
         * `white-box`: Arbor's tool loop plays the programs; `black-box`: `command` (argv, run from
         * /workspace in the program's sandbox, OPENAI_BASE_URL/OPENAI_API_KEY pointing at the program's
         * gateway endpoint, OPENAI_MODEL its model) does, after the env's set-up; maxTurns/maxTotalTokens
         * bound its model calls.
         */
        kind: z.enum(["white-box", "black-box"]).default("white-box"),
        /**
         * White box: how the model calls tools — `markup` (Arbor's `<|tool_call|>` text, the tiny
         * policy's way) or `native` (OpenAI `tools`; the engine's tool parser reads the model's own
         * format, e.g. Hermes `<tool_call>` for ChatML models). Native needs an environment with a
         * native system prompt (envs/native-tools.ts).
         */
        toolMode: z.enum(["markup", "native"]).default("markup"),
        /**
         * White box: your own agent, a module path relative to this file (`#export` for a named export): an agent
         * definition, or a factory given Arbor's (the env's tools, toolMode, the limits above) returning one
         * (agents/module-agent.ts).
         */
        module: z.string().min(1).optional(),
        command: z.array(z.string().min(1)).min(1).optional(),
        /** Black box: files shipped into the workspace unchanged, workspace path → host path. */
        files: z.record(z.string().min(1), z.string().min(1)).optional(),
        /** Black box: installed npm packages the command imports (read-only copies in /workspace/node_modules). */
        nodePackages: z.array(z.string().min(1)).optional(),
        /**
         * Black box: the agent's install, seen read-only by every sandbox at /opt/agent and never copied
         * into a workspace — a folder, or `npm:<name>@<exact version>`, which Arbor installs once into
         * `installCache` (`npm install --prefix`, the machine's npm) before the run. With it the command's
         * HOME (and XDG config/cache dirs) is /workspace/.home, writable.
         */
        install: z.string().min(1).optional(),
        /** Black box: cache folder of npm installs (default `<tmpdir>/arbor-agent-installs`; readable by the sandbox uid). */
        installCache: z.string().min(1).optional(),
        /** Black box: longest an npm install may take, ms. */
        installTimeoutMs: positiveInt.default(300_000),
        /** Black box: workspace path the task text (the prompt's user turns) is written to. */
        taskFile: z.string().min(1).default("TASK.md"),
        /** Black box: extra environment of the command. */
        env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"), z.string()).optional(),
        /** Black box: wall-clock limit of the whole command, ms (default: sandbox.wallMs). */
        wallMs: positiveInt.optional(),
      })
      .strict()
      .superRefine((a, ctx) => {
        if (a.kind === "black-box") {
          if (a.command === undefined) ctx.addIssue({ code: "custom", path: ["command"], message: "required when kind is black-box" });
          if (a.context !== undefined) ctx.addIssue({ code: "custom", path: ["context"], message: "applies to kind white-box only (a black box manages its own context)" });
          if (a.module !== undefined) ctx.addIssue({ code: "custom", path: ["module"], message: "applies to kind white-box only (a black box is its command)" });
          return;
        }
        for (const f of ["command", "files", "nodePackages", "install", "installCache", "env", "wallMs"] as const) {
          if (a[f] !== undefined) ctx.addIssue({ code: "custom", path: [f], message: "applies to kind black-box only" });
        }
      })
      .prefault({}),
    sandbox: z
      .object({
        provider: z.enum(["bwrap", "docker", "k8s"]).default("bwrap"),
        /** Directory under which per-program workspaces are created. */
        root: z.string().optional(),
        cpuSeconds: positiveInt.default(5),
        memoryMb: positiveInt.default(256),
        wallMs: positiveInt.default(10_000),
        /** Size of each workspace, MiB (bwrap: a tmpfs of this size; k8s: the emptyDir limit). */
        workspaceMb: positiveInt.default(256),
        /** Processes per sandbox at once (bwrap: cgroup pids.max; docker: PidsLimit). */
        maxProcesses: positiveInt.default(64),
        /** Warm-pool size: sandboxes prepared ahead for programs about to start (0 = no preparation ahead). */
        poolSize: z.number().int().min(0).default(0),
        /** Period of the pool's leak check (held sandboxes of programs no longer live), ms. */
        leakCheckMs: positiveInt.default(30_000),
        docker: z
          .object({ image: z.string().default("debian:bookworm-slim"), cpus: z.number().positive().default(1) })
          .strict()
          .prefault({}),
        k8s: z
          .object({
            namespace: z.string().default("default"),
            image: z.string().default("debian:bookworm-slim"),
            cpus: z.number().positive().default(1),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    /**
     * Reward weights by reward function (src/reward/registry.ts); total = Σ weight·component and
     * each component is stored beside it. `stepRewards` also splits the total over the calls as
     * `step:<k>` components (reward-to-go). `completion-time` and `judge` need per-group rewards.
     * `judge` asks `options.judge.model` (a name the run's backends serve) through a gateway of its own
     * over the run's backends (src/cli/run-judge.ts); its calls go to `output.dir/judge-calls.jsonl`.
     */
    reward: z
      .object({
        outcome: z.number().default(1),
        process: z.number().optional(),
        "completion-time": z.number().optional(),
        judge: z.number().optional(),
        /** Your own reward functions (reward/custom-reward.ts): `./my-reward.ts#score`, {module, name, weight} or a list. */
        custom: CustomRewardsSchema.optional(),
        stepRewards: z.boolean().default(false),
        options: RewardOptionsSchema.prefault({}),
      })
      .strict()
      .refine((r) => r.judge === undefined || r.options.judge !== undefined, {
        message: "the judge reward needs options.judge.model",
        path: ["options", "judge"],
      })
      .prefault({}),
    /**
     * Held-out evaluation (issue 20): `tasks` tasks of the environment that no iteration trains on (drawn after
     * the training tasks, any with a training task's prompt skipped), `samples` programs each at `temperature`
     * (default: agent.temperature), run for policy version 0 and then every `every` versions and the last. Each
     * (task, sample) has the same sampling seed at every version, so versions compare pairwise. Off when absent.
     */
    eval: z
      .object({
        tasks: positiveInt.max(10_000).default(32),
        samples: positiveInt.max(1_000).default(4),
        temperature: z.number().min(0).max(5).optional(),
        every: positiveInt.default(1),
      })
      .strict()
      .optional(),
    /**
     * Run tracking beyond metrics.jsonl and TensorBoard (always written): MLflow through its REST API
     * (loop/mlflow-sink.ts), Weights & Biases through its HTTP API (loop/wandb-sink.ts). Off when absent.
     */
    tracking: z
      .object({
        mlflow: z
          .object({
            /** Tracking server URL (default: MLFLOW_TRACKING_URI). */
            url: z.string().url().optional(),
            /** Experiment name, created when missing (default: the run's name). */
            experiment: z.string().min(1).optional(),
          })
          .strict()
          .optional(),
        /** Weights & Biases over its HTTP API (loop/wandb-sink.ts); the key from WANDB_API_KEY. */
        wandb: z
          .object({
            project: z.string().min(1),
            /** User or team (default: the key's default entity). */
            entity: z.string().min(1).optional(),
            /** Server (default: WANDB_BASE_URL, else https://api.wandb.ai). */
            baseUrl: z.string().url().optional(),
          })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
    /** Rollout → reward → batch → train → weight sync, this many times (training needs `train`). */
    iterations: positiveInt.default(1),
    /**
     * RL training with the reference trainer after each iteration's rollout: the batch (estimator from
     * batch/estimators/registry.ts, merged samples, prefix tree), one optimizer step, a versioned GGUF
     * checkpoint under `output.dir/checkpoints`, and a weight sync to every in-process engine.
     */
    train: z
      .object({
        estimator: z.string().min(1).default("grpo"),
        estimatorOptions: z.record(z.string(), z.unknown()).default({}),
        lr: z.number().positive().default(1e-3),
        /**
         * Optimizer steps on each batch (PPO epochs): from the second on, the ratio against the batch's behaviour
         * logprobs moves off 1 and the estimator's clip (and dual clip) bound the update. One version per batch.
         */
        epochs: positiveInt.max(64).default(1),
        /**
         * Learning-rate schedule over the run's optimizer steps (iterations × epochs): `constant` (lr throughout) or
         * `cosine` (linear warm-up over `warmupSteps`, then cosine decay to lr/10 at the last step).
         */
        lrSchedule: z.enum(["constant", "cosine"], { error: "must be 'constant' or 'cosine'" }).default("constant"),
        warmupSteps: z.number().int().min(0).default(0),
        maxGradNorm: z.number().positive().default(1),
        /**
         * Learning-rate multipliers per parameter: GGUF tensor name, or a pattern with `*`, → multiplier (that
         * tensor steps at multiplier × lr; trainer/lr-scale.ts). E.g. `{ "output_norm.weight": 100 }` lets the
         * policy's sharpness move as fast as the updates ask, which Adam's per-coordinate steps otherwise prevent.
         */
        lrScale: z.record(z.string().min(1), z.number().positive().finite()).optional(),
        /** Checkpoint versions kept on disk. */
        keepCheckpoints: positiveInt.default(3),
        /**
         * Who trains: `reference` (the default) is the in-process reference trainer; `external` serves
         * each batch over the HTTP trainer protocol (docs/batch-schema.md) to a trainer in another process
         * (`arbor train-worker`, or a Megatron/FSDP trainer), which announces new weights and acks the batch.
         * lr, epochs, lrSchedule, warmupSteps, maxGradNorm, lrScale and keepCheckpoints are the reference trainer's; an external trainer has its own.
         */
        trainer: z
          .enum(["reference", "external"], { error: "must be 'reference' (the in-process trainer) or 'external' (a trainer over the HTTP trainer protocol)" })
          .default("reference"),
        /** Where the trainer protocol listens for an external trainer (train.trainer: external only). */
        external: ExternalTrainerConfigSchema.optional(),
        /**
         * A draft model kept aligned with the policy (issue 17; trainer/draft-distiller.ts): the policy cut to
         * `layers` blocks, distilled after every step on the batch's sequences (`steps` Adam steps of `batch`
         * sequences at `lr`, Top-K KL to the policy's `topK` most likely tokens) and written as `draft-vN.gguf`
         * beside each checkpoint, which engines with `speculative.method: draft-model` serve. Reference trainer only.
         */
        draftModel: z
          .object({
            layers: positiveInt.default(1),
            steps: positiveInt.max(1_000_000).default(20),
            batch: positiveInt.max(4096).default(8),
            lr: z.number().positive().default(1e-4),
            topK: positiveInt.default(16),
          })
          .strict()
          .optional(),
      })
      .strict()
      // An external trainer always gets a listening address and a wait limit, the defaults when not given.
      .transform((t) => (t.trainer === "external" ? { ...t, external: t.external ?? ExternalTrainerConfigSchema.parse({}) } : t))
      .optional(),
    /**
     * Where trajectories are stored: `sqlite` (default; `output.dir/store.sqlite`, embedded) or `postgres`
     * (`url`, e.g. postgres://user@host:5432/db, and `schema`, default "arbor"; several processes and hosts
     * share it: src/store/postgres-store.ts).
     */
    store: z
      .object({
        kind: z.enum(["sqlite", "postgres"], { error: "must be sqlite or postgres" }).default("sqlite"),
        url: z.string().min(1).optional(),
        schema: z.string().min(1).optional(),
        poolSize: positiveInt.optional(),
        /** How long a write or read keeps trying to reach the server through an outage, ms (default 30000). */
        reconnectMs: z.number().int().min(0).max(86_400_000).optional(),
      })
      .strict()
      .superRefine((st, ctx) => {
        if (st.kind === "postgres" && st.url === undefined) ctx.addIssue({ code: "custom", path: ["url"], message: "required for the postgres store (e.g. postgres://postgres@127.0.0.1:5432/arbor)" });
        if (st.kind === "sqlite") {
          for (const k of ["url", "schema", "poolSize", "reconnectMs"] as const) if (st[k] !== undefined) ctx.addIssue({ code: "custom", path: [k], message: "only used with kind: postgres (the sqlite store is output.dir/store.sqlite)" });
        }
      })
      .prefault({}),
    output: z
      .object({
        /** Directory for the store, the batch and the model (relative to the working directory). */
        dir: z.string().min(1, "must not be empty (the run's folder: its store, checkpoints and batches)").default(".arbor/runs/run"),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    cfg.engines.forEach((e, i) => {
      if (cfg.engines.findIndex((o) => o.name === e.name) < i) {
        ctx.addIssue({ code: "custom", path: ["engines", i, "name"], message: `'${e.name}' is used twice (engine names must be unique)` });
      }
      if (e.executor === "costmodel" && e.costProfile === undefined) {
        ctx.addIssue({ code: "custom", path: ["engines", i, "costProfile"], message: "required when executor is costmodel" });
      }
      if (e.sampler === "llama.cpp" && e.executor !== "llamacpp") {
        ctx.addIssue({ code: "custom", path: ["engines", i, "sampler"], message: `llama.cpp draws the tokens only on the llamacpp executor, not ${e.executor}` });
      }
      if (e.speculative !== undefined && e.executor !== "llamacpp-scheduled") {
        ctx.addIssue({ code: "custom", path: ["engines", i, "speculative"], message: `speculative decoding runs on the llamacpp-scheduled executor, not ${e.executor}` });
      }
    });
    const engineNames = new Set(cfg.engines.map((e) => e.name));
    cfg.backends.forEach((b, i) => {
      if (b.weightSync !== undefined && engineNames.has(b.name)) {
        ctx.addIssue({ code: "custom", path: ["backends", i, "weightSync"], message: `backend '${b.name}' is the in-process engine of that name, which loads weights itself; remove weightSync` });
      }
      if (b.weightSync?.kind === "llamacpp-restart" && b.type !== "llamacpp") {
        ctx.addIssue({ code: "custom", path: ["backends", i, "weightSync", "kind"], message: `llamacpp-restart manages a llama-server: backend '${b.name}' must have type: llamacpp` });
      }
      const managed = b.weightSync?.kind === "llamacpp-restart";
      if (managed && b.url) {
        ctx.addIssue({ code: "custom", path: ["backends", i, "url"], message: `backend '${b.name}' is a llama-server Arbor starts (weightSync.kind: llamacpp-restart); set weightSync.port instead of url` });
      }
      if (b.type === "disagg") {
        // Its engines are processes of their own (`arbor serve engine --role`), reached by URL.
        if (engineNames.has(b.name)) {
          ctx.addIssue({ code: "custom", path: ["backends", i, "name"], message: `backend '${b.name}' (type: disagg) reaches its engines by URL; it cannot share its name with the in-process engine '${b.name}'` });
        }
        if (cfg.train !== undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["backends", i, "type"],
            message: `backend '${b.name}': type: disagg cannot follow training's policy versions yet (its engines run apart and are not synced by this run); remove train or the backend`,
          });
        }
        return;
      }
      if (!b.url && !engineNames.has(b.name) && !managed) {
        ctx.addIssue({
          code: "custom",
          path: ["backends", i, "url"],
          message: `backend '${b.name}' has no url and no in-process engine of that name`,
        });
      }
    });
    if (cfg.agent.kind === "black-box" && cfg.sandbox.provider === "bwrap" && cfg.sandbox.memoryMb < BLACK_BOX_MIN_MEMORY_MB) {
      ctx.addIssue({
        code: "custom",
        path: ["sandbox", "memoryMb"],
        message:
          `${cfg.sandbox.memoryMb} is too little for a black-box agent: under bwrap it is the sandbox's address-space limit (RLIMIT_AS), ` +
          `and the agent's launcher runs Node there, which reserves most of a GiB as it starts; set at least ${BLACK_BOX_MIN_MEMORY_MB}`,
      });
    }
    if (cfg.eval !== undefined && cfg.train === undefined) {
      ctx.addIssue({ code: "custom", path: ["eval"], message: "held-out evaluation compares policy versions: it needs `train`" });
    }
    if (cfg.train !== undefined) {
      // Every estimator takes the shaping options (batch/estimators/advantage-shaping.ts) beside its own.
      const { shaping } = splitShapingOptions(cfg.train.estimatorOptions);
      const parsed = AdvantageShapingSchema.safeParse(shaping);
      if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ code: "custom", path: ["train", "estimatorOptions", ...issue.path.map(String)], message: issue.message });
      if (shaping.zeroAdvantageUnsolvedGroups === true && cfg.reward.outcome === 0) {
        ctx.addIssue({ code: "custom", path: ["train", "estimatorOptions", "zeroAdvantageUnsolvedGroups"], message: "needs the outcome reward (reward.outcome must not be 0): it tells which programs solved their task" });
      }
    }
    if (cfg.train?.trainer === "external") {
      // The external trainer has its own optimizer settings; silently ignoring these would mislead.
      if (cfg.train.epochs !== 1) ctx.addIssue({ code: "custom", path: ["train", "epochs"], message: "is the reference trainer's: an external trainer (train.trainer: external) sets its own" });
      if (cfg.train.lrSchedule !== "constant") ctx.addIssue({ code: "custom", path: ["train", "lrSchedule"], message: "is the reference trainer's: an external trainer (train.trainer: external) sets its own" });
      if (cfg.train.lrScale !== undefined) ctx.addIssue({ code: "custom", path: ["train", "lrScale"], message: "is the reference trainer's: an external trainer (train.trainer: external) sets its own" });
      if (cfg.train.draftModel !== undefined) ctx.addIssue({ code: "custom", path: ["train", "draftModel"], message: "is trained by the reference trainer (train.trainer: reference), not an external one" });
    }
    if (cfg.train !== undefined && cfg.train.warmupSteps > 0 && cfg.train.lrSchedule !== "cosine") {
      ctx.addIssue({ code: "custom", path: ["train", "warmupSteps"], message: "is the cosine schedule's warm-up: set lrSchedule: cosine, or leave warmupSteps at 0" });
    }
    if (cfg.iterations > 1 && cfg.train === undefined) {
      ctx.addIssue({ code: "custom", path: ["iterations"], message: "more than one iteration needs `train` (what would change between them?)" });
    }
    if (cfg.train?.external !== undefined && cfg.train.trainer !== "external") {
      ctx.addIssue({ code: "custom", path: ["train", "external"], message: "only used with train.trainer: external (set trainer: external, or remove external)" });
    }
    if (cfg.train?.trainer === "external" && cfg.rollout.mode === "async") {
      ctx.addIssue({
        code: "custom",
        path: ["train", "trainer"],
        message: "external trainers are not supported with rollout.mode: async yet (only sync iterations drive the trainer protocol); use rollout.mode: sync or train.trainer: reference",
      });
    }
    if (cfg.train !== undefined) {
      cfg.backends.forEach((b, i) => {
        if (!engineNames.has(b.name) && b.weightSync === undefined && b.type !== "disagg") {
          ctx.addIssue({
            code: "custom",
            path: ["backends", i, "weightSync"],
            message: `training must get every policy version onto backend '${b.name}'; add weightSync (kind: sglang, vllm-reload, vllm-lora or llamacpp-restart) or remove the backend`,
          });
        }
      });
    }
    if (cfg.engines.length === 0 && cfg.backends.length === 0) {
      ctx.addIssue({ code: "custom", path: ["engines"], message: "need at least one engine or backend" });
    }
  });

export type RunConfig = z.infer<typeof RunConfigSchema>;
export type EnvConfig = RunConfig["env"];
export type CustomRewardSpec = NonNullable<RunConfig["reward"]["custom"]>[number];
export type EngineConfig = z.infer<typeof EngineConfigSchema>;
export type BackendConfig = z.infer<typeof BackendConfigSchema>;
export type WeightSyncConfig = z.infer<typeof WeightSyncConfigSchema>;
export type DisaggCostOptions = z.input<typeof DisaggCostOptionsSchema>;
export type ModelConfig = z.infer<typeof ModelConfigSchema>;
export type ExternalTrainerConfig = z.infer<typeof ExternalTrainerConfigSchema>;
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;

/** Format a zod error as `path: reason` lines, one per issue. */
export function formatZodError(err: z.ZodError): string {
  return err.issues
    .map((i) => {
      const path = i.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("");
      return `${path.replace(/^\./, "") || "(root)"}: ${i.message}`;
    })
    .join("; ");
}

/** Validate an already-parsed config object. Throws {@link ArborError} naming field and reason. */
export function parseRunConfig(raw: unknown, source = "config"): RunConfig {
  const result = RunConfigSchema.safeParse(raw ?? {});
  if (!result.success) throw new ArborError(`invalid ${source}: ${formatZodError(result.error)}`, "config");
  return result.data;
}

/**
 * Load and validate a YAML run config. Relative paths inside stay relative to the working directory.
 * @param overrides settings from the command line (`--set`), applied to the file's YAML before validation
 */
export function loadRunConfig(path: string, overrides: readonly ConfigOverride[] = []): RunConfig {
  const source = `config ${path}`;
  return resolveConfigPaths(parseRunConfig(applyOverrides(readYamlFile(path, "config"), overrides, source), source), path);
}

/**
 * The paths a config names for the user's own code and data (`env.module`, a task file in `env.tasks`,
 * `reward.custom[].module`) made absolute against the config file's folder, so a config works from any
 * working directory and a deployment's workers get paths they can open. Other paths stay as they are.
 */
export function resolveConfigPaths(cfg: RunConfig, configPath: string): RunConfig {
  const dir = dirname(resolve(configPath));
  const abs = (p: string): string => (isAbsolute(p) ? p : resolve(dir, p));
  // `#export` is not part of the path.
  const absSpec = (spec: string): string => {
    const hash = spec.lastIndexOf("#");
    return hash < 0 ? abs(spec) : `${abs(spec.slice(0, hash))}${spec.slice(hash)}`;
  };
  return {
    ...cfg,
    env: { ...cfg.env, ...(cfg.env.module !== undefined ? { module: absSpec(cfg.env.module) } : {}), ...(typeof cfg.env.tasks === "string" ? { tasks: abs(cfg.env.tasks) } : {}) },
    reward: { ...cfg.reward, ...(cfg.reward.custom ? { custom: cfg.reward.custom.map((c) => ({ ...c, module: absSpec(c.module) })) } : {}) },
    agent: { ...cfg.agent, ...(cfg.agent.module !== undefined ? { module: absSpec(cfg.agent.module) } : {}) },
  };
}

/** The parsed YAML of a file; throws naming the file (as `what`) and the reason when it is missing or not YAML. */
export function readYamlFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ArborError(`cannot read ${what} ${path}: ${code === "ENOENT" ? "no such file" : String(e)}`, "config");
  }
  try {
    return parseYaml(text);
  } catch (e) {
    const msg = e instanceof YAMLParseError ? e.message.split("\n")[0] : String(e);
    throw new ArborError(`invalid ${what} ${path}: YAML syntax: ${msg}`, "config");
  }
}

/**
 * The model name white-box agents send: the first backend's configured name, else the first
 * engine's served name. Any name reaches the program's backends (they send their served name).
 */
export function servedModelOf(cfg: RunConfig): string {
  return cfg.backends.find((b) => b.model !== undefined)?.model ?? cfg.engines[0]?.servedModelName ?? "arbor-tiny";
}
