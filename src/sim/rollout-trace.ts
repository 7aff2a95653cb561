// What the rollout simulation records while it runs (`RolloutSimTrace`): every step passes through
// `observeStep` on its way from the executor to the engine, and `sample` takes the time series once per
// period. It also checks the run as it goes: the virtual clock never goes back, a step never lasts a
// negative time, and no engine ever holds more KV blocks than it has.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import type { KvBlockManager } from "../engine/kv/block-manager.js";
import type { Scheduler } from "../engine/scheduler/scheduler.js";
import type { StepPlan, StepResult } from "../engine/scheduler/step-plan.js";

/** What `arbor sim` draws and checks: time series, every request's submission and end, KV peaks. */
export interface RolloutSimTrace {
  sampleMs: number;
  /** Output tokens sampled in each period [i·sampleMs, (i+1)·sampleMs), by the step end time. */
  outputTokensPerPeriod: number[];
  /** At each period boundary i·sampleMs (i = 1, 2, …): each engine's fraction of KV blocks in use. */
  kvUsage: number[][];
  /** At each period boundary: preemptions and recomputed tokens so far. */
  preemptions: number[];
  recomputedTokens: number[];
  /** Engine names, in kvUsage's inner order. */
  engines: string[];
  /** Requests that ended (stop or budget) and were taken in a batch, and requests cut off (none in a finished run). */
  completed: number;
  aborted: number;
  /** Per ended request: clock time of its first placement and of its end, ms (same order). */
  submittedMs: number[];
  endedMs: number[];
  /** Highest fraction of KV blocks in use on any engine at any step (checked against capacity at every step). */
  peakKvUsage: number;
  /** Context tokens whose KV was computed again (after preemption, a chunk continuing without a cache hit). */
  recomputedTokensTotal: number;
  /** Output tokens sampled by the engines (taken or not). */
  sampledTokens: number;
}

/** One engine as the recorder sees it. */
export interface TracedEngine {
  name: string;
  kv: KvBlockManager;
  scheduler: Scheduler;
}

/** A chunk's context when it was placed (prompt ‖ generated then), and the tokens it had generated before. */
export interface TracedChunk {
  context: number;
  generatedBefore: number;
}

/** Records a rollout simulation's trace; see the file header. */
export class RolloutTraceRecorder {
  readonly trace: RolloutSimTrace;
  private lastSeenMs = 0;
  /** Per chunk: the highest prefill position computed so far (a recompute is a prefill below it). */
  private readonly prefillHigh = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    sampleMs: number,
    engines: readonly string[],
  ) {
    if (!(sampleMs > 0)) throw new ArborError(`rollout sim: sampleMs must be > 0, got ${sampleMs}`, "config");
    this.trace = {
      sampleMs,
      outputTokensPerPeriod: [],
      kvUsage: [],
      preemptions: [],
      recomputedTokens: [],
      engines: [...engines],
      completed: 0,
      aborted: 0,
      submittedMs: [],
      endedMs: [],
      peakKvUsage: 0,
      recomputedTokensTotal: 0,
      sampledTokens: 0,
    };
  }

  /** The virtual clock only moves forward: every observation checks it. */
  checkTime(): void {
    const now = this.clock.now();
    if (now < this.lastSeenMs) throw new ArborError(`rollout sim: the clock went back from ${this.lastSeenMs} to ${now} ms`, "internal");
    this.lastSeenMs = now;
  }

  /**
   * Counts the tokens the step samples into its period, checks the engine's KV against its capacity, and counts
   * recomputed context: a prefill chunk's positions below what this chunk computed before (preempted and
   * recomputed), or below the context a continuation brought (its earlier chunks computed it), minus what the
   * prefix cache served. `chunkOf` gives a chunk by engine request id (undefined: not a tracked chunk).
   */
  observeStep(engine: TracedEngine, plan: StepPlan, result: StepResult, chunkOf: (requestId: string) => TracedChunk | undefined): StepResult {
    const trace = this.trace;
    this.checkTime();
    if (!(result.durationMs >= 0)) throw new ArborError(`rollout sim: ${engine.name} step ${plan.stepId} lasts ${result.durationMs} ms`, "internal");
    const usage = engine.kv.usage();
    if (usage > 1) throw new ArborError(`rollout sim: ${engine.name} uses ${usage} of its KV blocks at ${this.clock.now()} ms`, "internal");
    if (usage > trace.peakKvUsage) trace.peakKvUsage = usage;
    let sampled = 0;
    for (const s of result.sampled) if (s !== undefined) sampled++;
    if (result.moreTokens) for (const m of result.moreTokens) sampled += m?.length ?? 0;
    trace.sampledTokens += sampled;
    const period = Math.floor((this.clock.now() + result.durationMs) / trace.sampleMs);
    while (trace.outputTokensPerPeriod.length <= period) trace.outputTokensPerPeriod.push(0);
    trace.outputTokensPerPeriod[period] = (trace.outputTokensPerPeriod[period] as number) + sampled;
    for (const ch of plan.chunks) {
      // A decoding sequence (its token, plus any drafts it verifies) writes new KV only; rejected drafts'
      // positions are written again later, which is speculation's cost, not a recompute.
      if (ch.numComputedTokens > 0 && ch.numNewTokens === 1 + (ch.draftTokenIds?.length ?? 0)) continue;
      const c = chunkOf(ch.requestId);
      if (c === undefined) continue;
      const outputs = engine.scheduler.numOutputTokensOf(ch.requestId);
      const high = this.prefillHigh.get(ch.requestId) ?? 0;
      const before = Math.max(high, outputs > 0 ? c.context + outputs - 1 : c.generatedBefore > 0 ? c.context - 1 : 0);
      const end = ch.numComputedTokens + ch.numNewTokens;
      trace.recomputedTokensTotal += Math.max(0, Math.min(end, before) - ch.numComputedTokens);
      this.prefillHigh.set(ch.requestId, Math.max(end, high));
    }
    return result;
  }

  /** A chunk ended: its prefill high-water mark goes. */
  chunkEnded(requestId: string): void {
    this.prefillHigh.delete(requestId);
  }

  /** One sample of the series (each engine's KV usage, preemptions and recomputed tokens so far). */
  sample(engines: readonly TracedEngine[]): void {
    this.checkTime();
    this.trace.kvUsage.push(engines.map((n) => n.kv.usage()));
    this.trace.preemptions.push(engines.reduce((a, n) => a + n.scheduler.stats().preemptions, 0));
    this.trace.recomputedTokens.push(this.trace.recomputedTokensTotal);
  }
}
