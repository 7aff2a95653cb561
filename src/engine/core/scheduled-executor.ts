// The engine core shared by serving and simulation: the vLLM-style Scheduler and KV block manager
// behind the HTTP `Executor` interface. One async loop per executor plans a step, awaits the step
// runner (llama.cpp or the cost model), feeds the result back and streams each sampled token.
// Program-aware: requests carry a program id and a priority; programs can be paused and restored.
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { realClock } from "../../core/real-clock.js";
import type { ModelTokenizer } from "../../model/tokenizer.js";
import { checkGenerateRequest, type Executor, type ExecutorStats, type GenerateRequest, type GenerateResult, type KvTransfer, type ProgramControl, type ProgramInfo, type ProgramPauseTarget } from "../executor.js";
import { KvBlockManager, type KvBlockManagerOptions } from "../kv/block-manager.js";
import { StopRule, type SampledToken } from "../sampling.js";
import type { DraftBudget } from "../specdec/draft-budget.js";
import { Scheduler, type FinishedRequest, type SchedulerConfig } from "../scheduler/scheduler.js";
import type { ScheduledChunk, StepPlan } from "../scheduler/step-plan.js";
import { AbortedError } from "../sequence-pool.js";
import type { RunnerStepResult, StepRunner } from "./step-runner.js";

export interface ScheduledExecutorOptions {
  runner: StepRunner;
  /** Tokens in the vocabulary (valid ids are 0..vocabSize-1). */
  vocabSize: number;
  /** Plain-text tokenization of the model the runner serves. */
  tokenize: (text: string) => number[];
  /** The served model's own tokenizer (absent: Arbor's vocabulary, e.g. the cost model). */
  tokenizer?: ModelTokenizer;
  /** `maxModelLen` is the executor's context size, `maxNumSeqs` its sequences. */
  scheduler: SchedulerConfig;
  kv: KvBlockManagerOptions;
  clock?: Clock;
  /** Observer of every step run (tests, tracing); must not throw. */
  onStep?: (plan: StepPlan, result: RunnerStepResult) => void;
  /** Speculative decoding's adaptive budget (absent: drafts verified in full). */
  draftBudget?: DraftBudget;
}

interface Pending {
  programId: string | undefined;
  tokens: SampledToken[];
  onToken: ((t: SampledToken) => void) | undefined;
  resolve: (r: GenerateResult) => void;
  reject: (e: Error) => void;
  detach: () => void;
}

/** An Executor whose requests go through the engine Scheduler; see the file header. */
export class ScheduledExecutor implements Executor {
  readonly vocabSize: number;
  readonly contextSize: number;
  readonly sequences: number;
  readonly scheduler: Scheduler;
  readonly kv: KvBlockManager;
  readonly runner: StepRunner;
  readonly schedulingPolicy: "fcfs" | "priority";
  readonly programs: ProgramControl;
  readonly kvTransfer?: KvTransfer;
  readonly tokenizer?: ModelTokenizer;
  private readonly tokenizeFn: (text: string) => number[];
  private readonly onStep: ScheduledExecutorOptions["onStep"];
  private readonly pending = new Map<string, Pending>();
  private nextId = 0;
  /** Set while the loop sleeps waiting for work; generate/abort/close call it. */
  private wakeUp: (() => void) | undefined;
  /** A request finished since the last plan: the next (possibly empty) plan tells the runner. */
  private flushNeeded = false;
  private closed = false;
  private readonly loopDone: Promise<void>;

  constructor(opts: ScheduledExecutorOptions) {
    if (!Number.isInteger(opts.vocabSize) || opts.vocabSize < 1) {
      throw new ArborError(`scheduled executor: vocabSize must be an integer >= 1, got ${opts.vocabSize}`, "config");
    }
    for (const id of opts.scheduler.stopTokenIds) {
      if (!Number.isInteger(id) || id < 0 || id >= opts.vocabSize) {
        throw new ArborError(`stop token id ${id} is outside the model's vocabulary (size ${opts.vocabSize})`, "config");
      }
    }
    this.vocabSize = opts.vocabSize;
    this.runner = opts.runner;
    this.tokenizeFn = opts.tokenize;
    if (opts.tokenizer) this.tokenizer = opts.tokenizer;
    this.onStep = opts.onStep;
    this.kv = new KvBlockManager(opts.kv);
    this.scheduler = new Scheduler(opts.scheduler, this.kv, opts.clock ?? realClock, opts.draftBudget);
    this.contextSize = opts.scheduler.maxModelLen;
    this.sequences = opts.scheduler.maxNumSeqs;
    this.schedulingPolicy = opts.scheduler.policy;
    this.programs = {
      pause: (id, to) => this.pauseProgram(id, to),
      restore: (id) => this.restoreProgram(id),
      info: (id) => this.programInfo(id),
    };
    const transfer = opts.runner.transfer;
    if (transfer) {
      this.kvTransfer = {
        compat: transfer.compat,
        // Registered synchronously: the request it waits for may be submitted right after.
        exportState: (id) => (this.closed ? Promise.reject(new ArborError("engine is shut down", "closed")) : transfer.exportState(id)),
        importState: (id, tokens, compat, data) => transfer.importState(id, tokens, compat, data),
        discardState: (id) => transfer.discardState(id),
      };
    }
    this.loopDone = this.loop();
  }

  tokenize(text: string): number[] {
    return this.tokenizeFn(text);
  }

  stats(): ExecutorStats {
    const s = this.scheduler.stats();
    const k = this.kv.stats();
    return {
      running: s.running,
      waiting: s.waiting,
      usedTokens: (this.kv.numBlocks - this.kv.numFreeBlocks()) * this.kv.blockSize,
      totalTokens: this.kv.numBlocks * this.kv.blockSize,
      prefixCacheQueries: k.queries,
      prefixCacheHits: k.hits,
      preemptions: s.preemptions,
      ...(this.runner.specDecodeStats ? { specDecode: this.runner.specDecodeStats() } : {}),
    };
  }

  /**
   * Queue a request with the scheduler; resolves when it finishes. Rejects with CapacityError when
   * the waiting queue is full, and with AbortedError when aborted before its first step.
   */
  generate(req: GenerateRequest): Promise<GenerateResult> {
    if (this.closed) return Promise.reject(new ArborError("engine is shut down", "closed"));
    const prompt = req.promptTokenIds;
    try {
      checkGenerateRequest(req, this);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    if (req.signal?.aborted) return Promise.reject(new AbortedError());

    const requestId = `req-${this.nextId++}`;
    // With speculation the runner cuts a verified run at the stops itself, so it is told them too.
    const stop = req.controls || this.runner.specDecodeStats ? new StopRule(this.scheduler.config.stopTokenIds, req.controls ?? {}) : undefined;
    this.runner.addRequest(requestId, {
      promptTokenIds: prompt,
      maxTokens: req.maxTokens,
      temperature: req.temperature,
      topP: req.topP,
      topLogprobs: req.topLogprobs,
      rng: req.rng,
      ...(req.controls ? { controls: req.controls } : {}),
      ...(stop ? { stop } : {}),
      ...(req.programId !== undefined ? { programId: req.programId } : {}),
      ...(req.draftGroupId !== undefined ? { draftGroupId: req.draftGroupId } : {}),
    });
    try {
      this.scheduler.addRequest({
        requestId,
        promptTokenIds: [...prompt],
        maxTokens: req.maxTokens,
        ...(req.programId !== undefined ? { programId: req.programId } : {}),
        ...(req.priority !== undefined ? { priority: req.priority } : {}),
        ...(stop ? { stop } : {}),
      });
    } catch (err) {
      this.runner.removeRequest(requestId);
      return Promise.reject(err as Error);
    }
    return new Promise<GenerateResult>((resolve, reject) => {
      const signal = req.signal;
      const onAbort = (): void => this.abortRequest(requestId);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(requestId, {
        programId: req.programId,
        tokens: [],
        onToken: req.onToken,
        resolve,
        reject,
        detach: () => signal?.removeEventListener("abort", onAbort),
      });
      this.notify();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const err = new ArborError("engine is shutting down", "closed");
    for (const [id, p] of [...this.pending]) {
      this.scheduler.abort(id);
      this.settle(id, p, () => p.reject(err));
    }
    this.notify();
    await this.loopDone;
    await this.runner.close();
  }

  /**
   * Pause a program: the scheduler holds its new requests and the runner moves its last context's
   * KV to `to` (after its running requests finish). Throws ArborError "invalid_request" for a bad
   * target or a tier this engine lacks.
   */
  private async pauseProgram(programId: string, to: ProgramPauseTarget): Promise<ProgramInfo> {
    if (this.closed) throw new ArborError("engine is shut down", "closed");
    if (typeof programId !== "string" || programId === "") throw new ArborError("program id must be a non-empty string", "invalid_request");
    if (to !== "L2" && to !== "L3" && to !== "drop") throw new ArborError(`to must be "L2", "L3" or "drop", got ${String(to)}`, "invalid_request");
    const kv = this.runner.programs;
    if (kv && to !== "drop" && !kv.tiers.includes(to)) throw new ArborError(`no ${to} store is configured on this engine`, "invalid_request");
    this.scheduler.pauseProgram(programId, to);
    // The runner saves once the program's sequences are handed back, which the loop's next plan does.
    this.notify();
    await kv?.pauseProgram(programId, to);
    return this.programInfo(programId);
  }

  private async restoreProgram(programId: string): Promise<ProgramInfo> {
    if (this.closed) throw new ArborError("engine is shut down", "closed");
    if (typeof programId !== "string" || programId === "") throw new ArborError("program id must be a non-empty string", "invalid_request");
    // Paused on another engine to the shared L3 pool: learn of its state before its requests run here.
    await this.runner.programs?.prefetchProgram?.(programId);
    this.scheduler.restoreProgram(programId);
    // Its held requests can be admitted now: wake the loop, which idles while all waiting are held.
    this.notify();
    return this.programInfo(programId);
  }

  private programInfo(programId: string): ProgramInfo {
    let held = 0;
    let running = 0;
    for (const [id, p] of this.pending) {
      if (p.programId !== programId) continue;
      const st = this.scheduler.requestState(id);
      if (st?.held) held++;
      else if (st?.status === "running") running++;
    }
    const kv = this.runner.programs?.programKv(programId) ?? { where: "none" as const, tokens: 0 };
    return {
      programId,
      paused: this.scheduler.programPause(programId) ?? null,
      kv: kv.where,
      kvTokens: kv.tokens,
      heldRequests: held,
      runningRequests: running,
    };
  }

  /** The client went away: end the request now (its KV is freed by the scheduler). */
  private abortRequest(requestId: string): void {
    const p = this.pending.get(requestId);
    if (!p) return;
    const neverScheduled = this.scheduler.requestState(requestId)?.status === "waiting";
    this.scheduler.abort(requestId);
    this.flushNeeded = true;
    // As LlamaCppExecutor: a request still queued is refused; one that started answers with its tokens.
    if (neverScheduled) this.settle(requestId, p, () => p.reject(new AbortedError()));
    else this.settle(requestId, p, () => p.resolve({ tokens: p.tokens, finishReason: "abort" }));
    this.notify();
  }

  private settle(requestId: string, p: Pending, how: () => void): void {
    this.pending.delete(requestId);
    p.detach();
    how();
  }

  private notify(): void {
    const w = this.wakeUp;
    this.wakeUp = undefined;
    w?.();
  }

  /** Resolves at the next notify(); the loop's only way to wait for work (no polling). */
  private idle(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wakeUp = resolve;
    });
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      if (!this.scheduler.hasUnfinished()) {
        if (this.flushNeeded) {
          // Tell the runner which requests finished, so it frees their sequences now.
          this.flushNeeded = false;
          await this.runStep(this.scheduler.schedule());
          continue;
        }
        await this.idle();
        continue;
      }
      this.flushNeeded = false;
      const plan = this.scheduler.schedule();
      await this.runStep(plan);
      // Nothing schedulable (a preemption freed KV for the next plan, or all held): re-plan or wait.
      if (plan.chunks.length === 0 && plan.preempted.length === 0) await this.idle();
    }
  }

  private async runStep(plan: StepPlan): Promise<void> {
    let result: RunnerStepResult;
    try {
      result = await this.runner.run(plan);
    } catch (err) {
      this.failStep(plan, err as Error);
      return;
    }
    if (plan.chunks.length === 0) return;
    const finished = this.scheduler.onStepDone(result);
    try {
      this.onStep?.(plan, result);
    } catch {
      // An observer must not break the engine.
    }
    this.deliver(plan, result, finished);
  }

  /** Append each sampled token to its request (streaming it), then settle the finished ones. */
  private deliver(plan: StepPlan, result: RunnerStepResult, finished: FinishedRequest[]): void {
    // A verified run cut by a stop or a length cap: the scheduler kept this many outputs.
    const kept = new Map(finished.map((f) => [f.requestId, f.outputTokenIds.length]));
    for (let k = 0; k < plan.chunks.length; k++) {
      const s = result.sampled[k];
      const id = (plan.chunks[k] as ScheduledChunk).requestId;
      // Requests aborted while the step ran are gone from `pending`; the scheduler dropped their token too.
      const p = this.pending.get(id);
      if (!s || !p) continue;
      const moreTop = result.moreTop?.[k];
      const run = [s, ...(result.moreTokens?.[k] ?? [])];
      for (let i = 0; i < run.length; i++) {
        if (p.tokens.length >= (kept.get(id) ?? Infinity)) break;
        const t = run[i] as (typeof run)[number];
        const tok: SampledToken = { id: t.tokenId, logprob: t.logprob, top: (i === 0 ? result.top?.[k] : moreTop?.[i - 1]) ?? [] };
        p.tokens.push(tok);
        try {
          p.onToken?.(tok);
        } catch {
          // onToken must not throw; a failing stream is the HTTP layer's to handle.
        }
      }
    }
    for (const f of finished) {
      const p = this.pending.get(f.requestId);
      if (!p) continue;
      this.flushNeeded = true;
      const out: GenerateResult = { tokens: p.tokens, finishReason: f.finishReason };
      if (f.stopTokenId !== undefined) out.stopTokenId = f.stopTokenId;
      this.settle(f.requestId, p, () => p.resolve(out));
    }
  }

  /** The runner failed: fail the step's requests with its error and close the step cleanly. */
  private failStep(plan: StepPlan, err: Error): void {
    const e = err instanceof ArborError ? err : new ArborError(`engine step ${plan.stepId} failed: ${err.message}`, "engine");
    for (const c of plan.chunks) {
      this.scheduler.abort(c.requestId);
      const p = this.pending.get(c.requestId);
      if (p) this.settle(c.requestId, p, () => p.reject(e));
    }
    this.flushNeeded = true;
    if (plan.chunks.length > 0) this.scheduler.onStepDone({ stepId: plan.stepId, sampled: [], durationMs: 0 });
  }
}
