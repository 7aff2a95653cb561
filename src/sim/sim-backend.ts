// A simulated engine behind the gateway's own Backend interface: token-level generation, metrics
// and program pause/restore over a SimEngine (real Scheduler + KV block manager, cost-model time)
// on a virtual clock. The simulator hands these to the production call path (router, program
// table, pause gate), which then cannot tell them from the built-in engine's HTTP adapter.
import {
  BackendCapabilityError,
  type BackendMetrics,
  type BackendReply,
  type GenerateRequest,
  type GenerateResult,
  type TokenBackend,
} from "../backends/backend.js";
import { ArborError } from "../core/errors.js";
import type { CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import type { KvBlockManager } from "../engine/kv/block-manager.js";
import type { FinishedRequest, PauseTarget, Scheduler } from "../engine/scheduler/scheduler.js";
import type { SimEngine } from "../engine/sim-engine.js";

/** The engine parts a simulated backend drives. */
export interface SimEngineParts {
  kv: KvBlockManager;
  scheduler: Scheduler;
  executor: CostModelExecutor;
  engine: SimEngine;
  /** KV capacity, tokens (whole blocks). */
  capacityTokens: number;
}

/**
 * One simulated engine as a TokenBackend. Each generation runs to exactly `maxTokens` tokens, the
 * last a stop token (the cost model is told the output length), as a workload's turn prescribes.
 * Wire the engine's `onFinished` to {@link SimBackend.finished}.
 */
export class SimBackend implements TokenBackend {
  readonly type = "sim";
  readonly url: string;
  readonly capabilities = { tokenIds: true, logprobs: true, pauseRestore: true };
  private readonly waiting = new Map<string, { resolve(r: GenerateResult): void; prompt: number[] }>();
  private nextId = 0;

  /**
   * `pauseTo`: where a paused program's KV goes — "drop" leaves it evictable in L1 (the engine has
   * no lower tier), "L2"/"L3" offloads it to that tier of the block manager, loaded back on restore.
   */
  constructor(
    readonly name: string,
    readonly parts: SimEngineParts,
    readonly pauseTo: PauseTarget = "drop",
  ) {
    this.url = `sim://${name}/v1`;
  }

  /** Prompt length of a request still in flight on this backend (0 when unknown). */
  promptLength(requestId: string): number {
    return this.waiting.get(requestId)?.prompt.length ?? 0;
  }

  generate(req: GenerateRequest): Promise<GenerateResult> {
    const requestId = `${req.programId ?? "anon"}#${this.nextId++}`;
    this.parts.executor.setOutputLength(requestId, req.maxTokens);
    return new Promise<GenerateResult>((resolve) => {
      this.waiting.set(requestId, { resolve, prompt: req.promptTokenIds });
      this.parts.engine.submit({ requestId, promptTokenIds: req.promptTokenIds, maxTokens: req.maxTokens, ...(req.programId !== undefined ? { programId: req.programId } : {}) });
    });
  }

  /** The engine finished a request: its generation resolves. */
  finished(f: FinishedRequest): void {
    const w = this.waiting.get(f.requestId);
    if (w === undefined) throw new ArborError(`sim backend ${this.name}: finished request ${f.requestId} was never sent`, "internal");
    this.waiting.delete(f.requestId);
    w.resolve({ outputTokenIds: f.outputTokenIds, logprobs: f.logprobs, finishReason: f.finishReason, policyVersion: 0, promptTokenIds: w.prompt });
  }

  async scrapeMetrics(): Promise<BackendMetrics> {
    const s = this.parts.scheduler.stats();
    return {
      running: s.running,
      waiting: s.waiting,
      kvUsage: this.parts.kv.usage(),
      kvCapacityTokens: this.parts.capacityTokens,
      prefixCacheQueries: null,
      prefixCacheHits: null,
      prefixCacheHitRate: null,
    };
  }

  /**
   * Pause: the program has no call in flight (the gate pauses only between calls), so its KV is
   * left evictable in the prefix cache ("drop") or offloaded to the backend's tier; a restore on
   * this engine finds what survived.
   */
  async pause(programId: string): Promise<void> {
    this.parts.scheduler.pauseProgram(programId, this.pauseTo);
  }

  async restore(programId: string): Promise<void> {
    this.parts.scheduler.restoreProgram(programId);
    this.parts.engine.kick();
  }

  /** The program ended: the engine forgets it. */
  endProgram(programId: string): void {
    this.parts.scheduler.endProgram(programId);
  }

  async health(): Promise<void> {}

  chatCompletions(): Promise<BackendReply> {
    return Promise.reject(new BackendCapabilityError(this.name, this.url, "is simulated: token-level generation only"));
  }

  completions(): Promise<BackendReply> {
    return Promise.reject(new BackendCapabilityError(this.name, this.url, "is simulated: token-level generation only"));
  }

  models(): Promise<unknown> {
    return Promise.resolve({ object: "list", data: [{ id: "sim", object: "model" }] });
  }
}
