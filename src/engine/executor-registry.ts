// Where the engine gets its executors: a registry from executor kind ("llamacpp",
// "llamacpp-scheduled", "costmodel", or one a caller registers) to a factory. The HTTP engine asks
// it for the executor of its configured kind on start, on a weight switch and on wake-up, so a new
// executor is one `register` call away and never an edit of the server. Every registered kind must
// pass the shared executor contract (executor.contract.ts).
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { stopTokenIds } from "../model/chat-template.js";
import type { Vocab } from "../model/vocab.js";
import { createCostModelEngine, loadScheduledLlamaCpp } from "./core/scheduled-engines.js";
import { getCostProfile } from "./costmodel/profile.js";
import type { Executor } from "./executor.js";
import type { KvStateTier } from "./kv/state-tier.js";
import { LlamaCppExecutor } from "./llamacpp-executor.js";
import type { LlamaGpu } from "./llama-runtime.js";
import type { SpeculativeOptions } from "./specdec/speculative-options.js";
import type { GroupDraftService } from "./specdec/group-draft-service.js";

/** Everything a factory may need to build one executor of an engine. */
export interface ExecutorSpec {
  /** Engine name (error messages). */
  engine: string;
  /** The GGUF policy to load (executors that serve real weights). */
  modelPath: string;
  /** Sequences decoded together. */
  sequences: number;
  /** Context length of one sequence, tokens. */
  contextSize: number;
  /** Requests that may wait for a sequence before generate rejects with CapacityError. */
  maxWaiting: number;
  /** Tokens that end a generation; absent: the loaded model's end-of-generation set (Arbor's for executors without a model). */
  stopTokenIds?: readonly number[];
  clock: Clock;
  /** Arbor's vocabulary (executors that do not load a model tokenize with it). */
  vocab: Vocab;
  /** Seed of executors that draw their own tokens (the cost model). */
  seed: number;
  /** F32 KV cache for trainer-exact logprobs (llama.cpp executors). */
  exactKv?: boolean;
  /** Who draws the tokens of the v0 llama.cpp executor (LlamaCppExecutorOptions.sampler); other kinds refuse "llama.cpp". */
  sampler?: "arbor" | "llama.cpp";
  /** llama.cpp build: false = the CPU build (default), "auto" = a GPU build where one is installed. */
  gpu?: LlamaGpu;
  /** Order of waiting requests on scheduled executors. */
  schedulingPolicy?: "fcfs" | "priority";
  /** Byte budget of a scheduled llama.cpp engine's own L2 tier of paused programs. */
  l2CapacityBytes?: number;
  /** The L3 tier of paused programs, shared by the engines of this process (left open on close). */
  l3?: KvStateTier;
  /** Cost profile name (see costmodel/profile.ts) of the cost-model executor. */
  costProfile?: string;
  /** Speculative decoding on the scheduled llama.cpp engine (absent: off; other kinds refuse it). */
  speculative?: SpeculativeOptions;
  /** Speculative decoding's in-process group service, kept by the engine across executors and served to other engines. */
  groupService?: GroupDraftService;
}

/** Builds one executor; rejects with a "config" ArborError when `spec` lacks what the kind needs. */
export type ExecutorFactory = (spec: ExecutorSpec) => Promise<Executor>;

/** Executor kinds to their factories; see the file header. */
export class ExecutorRegistry {
  private readonly factories = new Map<string, ExecutorFactory>();

  /** Add `kind`; a kind already registered is refused (two factories under one name is a bug). */
  register(kind: string, factory: ExecutorFactory): this {
    if (!/^[a-z][a-z0-9-]*$/.test(kind)) throw new ArborError(`executor kind must be lowercase letters, digits and '-', got ${JSON.stringify(kind)}`, "config");
    if (this.factories.has(kind)) throw new ArborError(`executor kind "${kind}" is already registered`, "config");
    this.factories.set(kind, factory);
    return this;
  }

  /** The registered kinds, in registration order. */
  kinds(): string[] {
    return [...this.factories.keys()];
  }

  has(kind: string): boolean {
    return this.factories.has(kind);
  }

  /** Build an executor of `kind`; an unknown kind is a "config" error naming the registered ones. */
  create(kind: string, spec: ExecutorSpec): Promise<Executor> {
    const factory = this.factories.get(kind);
    if (!factory) {
      const known = this.kinds().map((k) => `"${k}"`);
      return Promise.reject(new ArborError(`engine ${spec.engine}: executorKind must be ${known.join(", ")}, got ${JSON.stringify(kind)}`, "config"));
    }
    return factory(spec);
  }

  /** A copy with the same kinds, to which a caller may add its own without touching this one. */
  clone(): ExecutorRegistry {
    const copy = new ExecutorRegistry();
    for (const [k, f] of this.factories) copy.register(k, f);
    return copy;
  }
}

/** The built-in kinds: the v0 llama.cpp executor, the scheduled llama.cpp engine and the cost model. */
export function builtinExecutors(): ExecutorRegistry {
  return new ExecutorRegistry()
    .register("llamacpp", async (s) => {
      noSpeculation(s, "llamacpp");
      return LlamaCppExecutor.load({
        modelPath: s.modelPath,
        sequences: s.sequences,
        contextSize: s.contextSize,
        maxWaiting: s.maxWaiting,
        ...(s.stopTokenIds ? { stopTokenIds: s.stopTokenIds } : {}),
        ...(s.exactKv !== undefined ? { exactKv: s.exactKv } : {}),
        ...(s.gpu !== undefined ? { gpu: s.gpu } : {}),
        ...(s.sampler !== undefined ? { sampler: s.sampler } : {}),
      });
    })
    .register("llamacpp-scheduled", async (s) => {
      arborSampler(s, "llamacpp-scheduled");
      return loadScheduledLlamaCpp({
        modelPath: s.modelPath,
        sequences: s.sequences,
        contextSize: s.contextSize,
        maxWaiting: s.maxWaiting,
        ...(s.stopTokenIds ? { stopTokenIds: s.stopTokenIds } : {}),
        clock: s.clock,
        ...(s.exactKv !== undefined ? { exactKv: s.exactKv } : {}),
        ...(s.gpu !== undefined ? { gpu: s.gpu } : {}),
        ...(s.schedulingPolicy ? { schedulingPolicy: s.schedulingPolicy } : {}),
        ...(s.l2CapacityBytes !== undefined ? { l2CapacityBytes: s.l2CapacityBytes } : {}),
        ...(s.l3 ? { l3: s.l3 } : {}),
        ...(s.speculative ? { speculative: s.speculative } : {}),
        ...(s.groupService ? { groupService: s.groupService } : {}),
      });
    })
    .register("costmodel", async (s) => {
      noSpeculation(s, "costmodel");
      arborSampler(s, "costmodel");
      if (s.costProfile === undefined) throw new ArborError(`engine ${s.engine}: executorKind "costmodel" needs costProfile`, "config");
      return createCostModelEngine({
        sequences: s.sequences,
        contextSize: s.contextSize,
        maxWaiting: s.maxWaiting,
        stopTokenIds: s.stopTokenIds ?? stopTokenIds(s.vocab),
        clock: s.clock,
        ...(s.schedulingPolicy ? { schedulingPolicy: s.schedulingPolicy } : {}),
        profile: getCostProfile(s.costProfile),
        vocabSize: s.vocab.size,
        tokenize: (text) => s.vocab.encode(text),
        seed: s.seed,
      });
    });
}

/** Kinds that do not speculate refuse a `speculative` setting rather than ignore it. */
function noSpeculation(s: ExecutorSpec, kind: string): void {
  if (s.speculative) throw new ArborError(`engine ${s.engine}: speculative decoding runs on executorKind "llamacpp-scheduled", not "${kind}"`, "config");
}

function arborSampler(s: ExecutorSpec, kind: string): void {
  if (s.sampler === "llama.cpp") throw new ArborError(`engine ${s.engine}: sampler "llama.cpp" runs on executorKind "llamacpp", not "${kind}"`, "config");
}

/** The registry engines use unless given their own. */
export const executorRegistry: ExecutorRegistry = builtinExecutors();
