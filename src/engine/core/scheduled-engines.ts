// Ready-made ScheduledExecutors for the HTTP engine: llama.cpp (real tokens) and the cost model
// (modelled timing), with vLLM-like defaults for the scheduler and the paged KV cache.
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";
import type { ModelledSpeculation } from "../costmodel/costmodel-executor.js";
import type { CostProfile } from "../costmodel/profile.js";
import type { KvBlockManagerOptions } from "../kv/block-manager.js";
import type { KvStateTier } from "../kv/state-tier.js";
import type { LlamaGpu } from "../llama-runtime.js";
import type { SchedulingPolicy } from "../scheduler/request-queue.js";
import type { SchedulerConfig } from "../scheduler/scheduler.js";
import { DraftBudget } from "../specdec/draft-budget.js";
import { resolveSpeculative, type SpeculativeOptions } from "../specdec/speculative-options.js";
import type { GroupDraftService } from "../specdec/group-draft-service.js";
import { CostModelStepRunner } from "./costmodel-step-runner.js";
import { LlamaCppStepRunner } from "./llamacpp-step-runner.js";
import { ScheduledExecutor, type ScheduledExecutorOptions } from "./scheduled-executor.js";

/** Shape of a scheduled engine; unset fields take the defaults of {@link engineConfig}. */
export interface ScheduledEngineOptions {
  /** Requests run together (vLLM max_num_seqs; llama.cpp sequences). */
  sequences: number;
  /** Prompt + output tokens of one request (vLLM max_model_len). */
  contextSize: number;
  /**
   * Requests that may wait beyond the `sequences` about to run before generate rejects with
   * CapacityError (as LlamaCppExecutor's pool: a burst of sequences + maxWaiting is accepted).
   */
  maxWaiting: number;
  /** Tokens that end a generation (llama.cpp engines: default the model's end-of-generation set). */
  stopTokenIds?: readonly number[];
  /** Tokens per KV block (default 16, as vLLM). */
  blockSize?: number;
  /** KV blocks (default: enough for every sequence to hold a full context). */
  numBlocks?: number;
  /** Token budget per step (default 2048). */
  maxNumBatchedTokens?: number;
  /** Default true. */
  enableChunkedPrefill?: boolean;
  /** Default true. */
  enablePrefixCaching?: boolean;
  /** Order of waiting requests (vLLM --scheduling-policy; default "fcfs"): "priority" serves lower `priority` first. */
  schedulingPolicy?: SchedulingPolicy;
  clock?: Clock;
  onStep?: ScheduledExecutorOptions["onStep"];
}

/** The scheduler and KV configuration of a scheduled engine. */
export function engineConfig(o: ScheduledEngineOptions): { scheduler: SchedulerConfig; kv: KvBlockManagerOptions } {
  const blockSize = o.blockSize ?? 16;
  if (!Number.isInteger(blockSize) || blockSize < 1) throw new ArborError(`blockSize must be an integer >= 1, got ${blockSize}`, "config");
  const numBlocks = o.numBlocks ?? Math.ceil(o.contextSize / blockSize) * o.sequences;
  const enableChunkedPrefill = o.enableChunkedPrefill ?? true;
  return {
    scheduler: {
      maxNumBatchedTokens: o.maxNumBatchedTokens ?? (enableChunkedPrefill ? 2048 : Math.max(2048, o.contextSize)),
      maxNumSeqs: o.sequences,
      policy: o.schedulingPolicy ?? "fcfs",
      enableChunkedPrefill,
      maxModelLen: o.contextSize,
      stopTokenIds: [...(o.stopTokenIds ?? [])],
      // The scheduler admits at its next step, so requests about to run also sit in its queue.
      maxWaiting: o.maxWaiting + o.sequences,
    },
    kv: { blockSize, numBlocks, enablePrefixCaching: o.enablePrefixCaching ?? true },
  };
}

/** A scheduled engine on llama.cpp: load the GGUF at `modelPath` into one context of `sequences` sequences. */
export async function loadScheduledLlamaCpp(
  o: ScheduledEngineOptions & {
    modelPath: string;
    exactKv?: boolean;
    /** llama.cpp build (default false: CPU). */
    gpu?: LlamaGpu;
    /** Byte budget of the engine's own L2 store of paused programs (default 256 MiB). */
    l2CapacityBytes?: number;
    /** The L3 store of paused programs shared with other engines (left open on close). */
    l3?: KvStateTier;
    /** Speculative decoding (off when absent). */
    speculative?: SpeculativeOptions;
    /** Method "suffix": the in-process group service to draft from (absent: the runner's own). */
    groupService?: GroupDraftService;
  },
): Promise<ScheduledExecutor> {
  const runner = await LlamaCppStepRunner.load({
    modelPath: o.modelPath,
    sequences: o.sequences,
    contextSize: o.contextSize,
    ...(o.exactKv !== undefined ? { exactKv: o.exactKv } : {}),
    ...(o.gpu !== undefined ? { gpu: o.gpu } : {}),
    ...(o.l2CapacityBytes !== undefined ? { l2CapacityBytes: o.l2CapacityBytes } : {}),
    ...(o.l3 ? { l3: o.l3 } : {}),
    ...(o.speculative ? { speculative: o.speculative } : {}),
    ...(o.groupService ? { groupService: o.groupService } : {}),
    clock: o.clock ?? realClock,
  });
  try {
    const spec = o.speculative ? resolveSpeculative(o.speculative) : undefined;
    const budget = spec?.adaptive ? new DraftBudget({ maxPositions: spec.draft.maxSpecTokens }) : undefined;
    return new ScheduledExecutor({
      runner,
      vocabSize: runner.vocabSize,
      tokenize: (t) => runner.tokenize(t),
      tokenizer: runner.tokenizer,
      ...engineConfig({ ...o, stopTokenIds: o.stopTokenIds ?? runner.tokenizer.stopIds }),
      clock: o.clock ?? realClock,
      ...(o.onStep ? { onStep: o.onStep } : {}),
      ...(budget ? { draftBudget: budget } : {}),
    });
  } catch (err) {
    await runner.close();
    throw err;
  }
}

/**
 * A scheduled engine on the cost model: steps last what `profile` says (slept on `clock`). KV
 * geometry defaults to the profile's block size and HBM capacity.
 */
export function createCostModelEngine(
  o: ScheduledEngineOptions & {
    stopTokenIds: readonly number[];
    profile: CostProfile;
    vocabSize: number;
    tokenize: (text: string) => number[];
    seed?: number;
    /** Modelled speculative decoding, with the adaptive draft budget unless `adaptive` is false. */
    speculation?: ModelledSpeculation & { adaptive?: boolean };
  },
): ScheduledExecutor {
  const blockSize = o.blockSize ?? o.profile.blockSize;
  const minBlocks = Math.ceil(o.contextSize / blockSize);
  const numBlocks = o.numBlocks ?? Math.max(minBlocks, Math.floor(o.profile.hbmKvCapacityTokens / blockSize));
  const clock = o.clock ?? realClock;
  const runner = new CostModelStepRunner({
    profile: o.profile,
    vocabSize: o.vocabSize,
    stopTokenIds: [...o.stopTokenIds],
    ...(o.seed !== undefined ? { seed: o.seed } : {}),
    ...(o.speculation ? { speculation: { maxSpecTokens: o.speculation.maxSpecTokens, acceptance: o.speculation.acceptance } } : {}),
    clock,
  });
  return new ScheduledExecutor({
    runner,
    vocabSize: o.vocabSize,
    tokenize: o.tokenize,
    ...engineConfig({ ...o, blockSize, numBlocks }),
    clock,
    ...(o.onStep ? { onStep: o.onStep } : {}),
    ...(o.speculation && o.speculation.adaptive !== false ? { draftBudget: new DraftBudget({ maxPositions: o.speculation.maxSpecTokens }) } : {}),
  });
}
