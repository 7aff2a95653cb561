// Prefill/decode disaggregation (Forge, Mooncake) over simulated engine instances:
// each instance is a real Scheduler + KvBlockManager + cost-model executor on one VirtualClock, all
// sharing one L3 pool. A request runs whole on a `mixed` instance, or is prefilled on a `prefill`
// instance (prompt + first token), handed over through L3 at the pool's bandwidth, and decoded on a
// `decode` instance whose prefix lookup loads the KV back from L3.
// The cost model of what the built-in engines now do for real (engine/http/kv-handoff.ts: roles, the
// prompt's KV through the Redis pool); it measures interference and transfer time at scale.
import type { VirtualClock } from "../../core/clock.js";
import { ArborError, CapacityError } from "../../core/errors.js";
import type { Rng } from "../../core/rng.js";
import { CostModelExecutor } from "../../engine/costmodel/costmodel-executor.js";
import { validateCostProfile, type CostProfile } from "../../engine/costmodel/profile.js";
import { transferTimeMs } from "../../engine/costmodel/step-time.js";
import { KvBlockManager } from "../../engine/kv/block-manager.js";
import type { EngineRole } from "../../engine/http/kv-handoff.js";
import { InProcessKvTier } from "../../engine/kv/tier.js";
import { Scheduler, type FinishedRequest, type NewRequest, type SchedulerConfig } from "../../engine/scheduler/scheduler.js";
import { runUntilIdle, SimEngine } from "../../engine/sim-engine.js";
import { StepRecorder, type StepRecord } from "./step-recorder.js";

/** What an instance serves: whole requests, only prefills (+ first token), or only decodes (the engines' roles). */
export type { EngineRole };

export interface DisaggClusterOptions {
  /** One entry per instance. Either all "mixed", or at least one "prefill" and one "decode". */
  roles: readonly EngineRole[];
  profile: CostProfile;
  clock: VirtualClock;
  /** Each instance's executor draws from its own fork, so instances do not shift each other's streams. */
  rng: Rng;
  vocabSize: number;
  /** Stop ids of every scheduler and executor; needed for annotated output lengths. */
  stopTokenIds: number[];
  /** Overrides of every instance's scheduler config (defaults: 8192-token budget, 256 seqs, fcfs, chunked prefill). */
  scheduler?: Partial<Omit<SchedulerConfig, "stopTokenIds">>;
  /** L1 KV blocks per instance; default the profile's HBM capacity. */
  numBlocksPerInstance?: number;
  /** Capacity of the shared L3 pool, blocks; default 4 × the instances' L1 blocks together. */
  l3CapacityBlocks?: number;
  /** Bandwidth to and from L3, bytes/ms; default the profile's. The cost model charges L3 traffic at it. */
  l3BandwidthBytesPerMs?: number;
  /** Requests in the cluster at once (bounded: submit throws CapacityError beyond it); default 100,000. */
  maxInFlight?: number;
  /** Called once per request, at the clock time its last token was sampled. */
  onFinished?: (f: ClusterFinishedRequest) => void;
}

/** A request submitted to the cluster. */
export interface ClusterRequest extends NewRequest {
  /** Workload annotation: the request stops after exactly this many output tokens (stop token included). */
  outputLength?: number;
}

/** The KV handed from a prefill to a decode instance. */
export interface KvHandoff {
  /** Blocks the prefill instance sent to L3 (blocks already in the pool are not sent again). */
  blocksSent: number;
  bytesSent: number;
  /** Time from the prefill's end until the decode instance could take the request (the L3 link), ms. */
  offloadMs: number;
  /** Prompt tokens the decode instance found cached (in its L1 or loaded from L3). */
  decodeCachedTokens: number;
}

/** A request's end-to-end result: for a disaggregated request, the first token from the prefill
 * instance followed by the decode instance's tokens. */
export interface ClusterFinishedRequest extends FinishedRequest {
  arrivalTime: number;
  /** Clock time the first output token was sampled (TTFT = firstTokenTime − arrivalTime). */
  firstTokenTime: number;
  finishTime: number;
  /** Instance that ran the prefill (the whole request, on a mixed instance). */
  prefillInstance: number;
  /** Decode instance; absent when the request ended on its first instance. */
  decodeInstance?: number;
  handoff?: KvHandoff;
}

/** One simulated engine instance of the cluster. */
export interface ClusterInstance {
  readonly index: number;
  readonly role: EngineRole;
  readonly kv: KvBlockManager;
  readonly scheduler: Scheduler;
  readonly executor: CostModelExecutor;
  readonly engine: SimEngine;
  /** Requests routed to the instance and not finished there yet (the router's load measure). */
  readonly outstanding: number;
  /** What its steps did. */
  readonly steps: StepRecord;
}

export interface DisaggClusterStats {
  submitted: number;
  finished: number;
  inFlight: number;
  /** Requests handed from a prefill to a decode instance. */
  handoffs: number;
  handoffBlocksSent: number;
  handoffBytesSent: number;
  /** Σ offloadMs over handoffs (queueing on the link included). */
  handoffMs: number;
}

interface Instance {
  index: number;
  role: EngineRole;
  kv: KvBlockManager;
  scheduler: Scheduler;
  executor: CostModelExecutor;
  recorder: StepRecorder;
  engine: SimEngine;
  outstanding: number;
  outstandingTokens: number;
  /** When this instance's link to L3 is free again: handoffs from one instance queue on it. */
  linkFreeAt: number;
}

interface Tracked {
  req: ClusterRequest;
  arrivalTime: number;
  prefillInstance: number;
  decodeInstance?: number;
  /** The prefill instance's result, kept until the decode instance finishes. */
  first?: FinishedRequest;
  firstTokenTime?: number;
  handoff?: KvHandoff;
}

/**
 * N simulated instances with roles on one virtual clock and one L3 pool. `submit` requests (from
 * timers for arrivals), then `run()` until every request has finished.
 */
export class DisaggCluster {
  private readonly o: DisaggClusterOptions;
  private readonly profile: CostProfile;
  private readonly clock: VirtualClock;
  private readonly l3: InProcessKvTier;
  private readonly list: Instance[] = [];
  private readonly disaggregated: boolean;
  private readonly maxInFlight: number;
  private readonly maxModelLen: number;
  private readonly tracked = new Map<string, Tracked>();
  private readonly counters: DisaggClusterStats = {
    submitted: 0,
    finished: 0,
    inFlight: 0,
    handoffs: 0,
    handoffBlocksSent: 0,
    handoffBytesSent: 0,
    handoffMs: 0,
  };

  constructor(o: DisaggClusterOptions) {
    this.o = o;
    this.disaggregated = validateRoles(o.roles);
    const base = validateCostProfile(o.profile);
    const bw = o.l3BandwidthBytesPerMs ?? base.l3BandwidthBytesPerMs;
    if (!(bw > 0) || !Number.isFinite(bw)) {
      throw new ArborError(`disagg cluster: l3BandwidthBytesPerMs must be a finite number > 0, got ${bw}`, "config");
    }
    // The executors' cost model and the pool must agree on the bandwidth the handoff is charged at.
    this.profile = { ...base, l3BandwidthBytesPerMs: bw };
    this.clock = o.clock;
    const numBlocks = o.numBlocksPerInstance ?? Math.floor(base.hbmKvCapacityTokens / base.blockSize);
    checkInt("numBlocksPerInstance", numBlocks, 1);
    const l3Capacity = o.l3CapacityBlocks ?? 4 * numBlocks * o.roles.length;
    checkInt("l3CapacityBlocks", l3Capacity, 0);
    this.maxInFlight = o.maxInFlight ?? 100_000;
    checkInt("maxInFlight", this.maxInFlight, 1);
    this.l3 = new InProcessKvTier({ name: "L3", capacityBlocks: l3Capacity, bandwidthBytesPerMs: bw });
    const cfg: SchedulerConfig = {
      maxNumBatchedTokens: 8192,
      maxNumSeqs: 256,
      policy: "fcfs",
      enableChunkedPrefill: true,
      maxModelLen: Math.min(32_768, numBlocks * base.blockSize),
      maxWaiting: 100_000,
      ...o.scheduler,
      stopTokenIds: o.stopTokenIds,
    };
    this.maxModelLen = cfg.maxModelLen;
    o.roles.forEach((role, index) => {
      const kv = new KvBlockManager({
        blockSize: base.blockSize,
        numBlocks,
        enablePrefixCaching: true,
        bytesPerToken: base.kvBytesPerToken,
        l3: this.l3,
      });
      const scheduler = new Scheduler(cfg, kv, this.clock);
      const executor = new CostModelExecutor(this.profile, o.rng.fork(`disagg-instance-${index}`), {
        vocabSize: o.vocabSize,
        stopTokenIds: o.stopTokenIds,
      });
      const recorder = new StepRecorder(executor);
      const engine = new SimEngine({ scheduler, executor: recorder, clock: this.clock, onFinished: (f) => this.onInstanceFinished(index, f) });
      this.list.push({ index, role, kv, scheduler, executor, recorder, engine, outstanding: 0, outstandingTokens: 0, linkFreeAt: 0 });
    });
  }

  /** The shared L3 pool. */
  get pool(): InProcessKvTier {
    return this.l3;
  }

  /** The instances, in the order of `roles`. */
  get instances(): ClusterInstance[] {
    return this.list.map((i) => ({
      index: i.index,
      role: i.role,
      kv: i.kv,
      scheduler: i.scheduler,
      executor: i.executor,
      engine: i.engine,
      outstanding: i.outstanding,
      steps: i.recorder.record,
    }));
  }

  /**
   * Route a request now: whole to the least-loaded mixed instance, or to the least-loaded prefill
   * instance for its prompt and first token (the decode instance is chosen when its KV arrives).
   * Throws ArborError on bad input and CapacityError when `maxInFlight` requests are in the cluster.
   */
  submit(req: ClusterRequest): void {
    const id = req.requestId;
    if (typeof id !== "string" || id === "") throw new ArborError("disagg cluster: requestId must be a non-empty string", "invalid_request");
    if (this.tracked.has(id)) throw new ArborError(`disagg cluster: requestId "${id}" is already in the cluster`, "invalid_request");
    if (req.outputLength !== undefined && (!Number.isInteger(req.outputLength) || req.outputLength < 1)) {
      throw new ArborError(`disagg cluster ${id}: outputLength must be an integer >= 1, got ${req.outputLength}`, "invalid_request");
    }
    if (this.tracked.size >= this.maxInFlight) throw new CapacityError("disagg cluster", this.maxInFlight);
    const inst = this.leastLoaded(this.disaggregated ? "prefill" : "mixed");
    const arrivalTime = req.arrivalTime ?? this.clock.now();
    const first: NewRequest = { ...withoutAnnotation(req), arrivalTime };
    if (this.disaggregated) {
      first.maxTokens = 1;
      // Without an annotation the executor never samples a stop, so a longer request survives its first token.
      if (req.outputLength === 1) inst.executor.setOutputLength(id, 1);
    } else if (req.outputLength !== undefined) {
      inst.executor.setOutputLength(id, req.outputLength);
    }
    // addRequest validates the rest (prompt, maxTokens, ...) before anything is tracked.
    inst.engine.submit(first);
    this.tracked.set(id, { req, arrivalTime, prefillInstance: inst.index });
    this.assign(inst, req.promptTokenIds.length);
    this.counters.submitted++;
    this.counters.inFlight = this.tracked.size;
  }

  /** True while a request is in the cluster (running, queued or in transfer). */
  hasWork(): boolean {
    return this.tracked.size > 0 || this.list.some((i) => i.engine.hasWork());
  }

  /** Fire timers until the clock is idle; throws when a request never finished. */
  run(): void {
    runUntilIdle(this.clock, this.list.map((i) => i.engine));
    if (this.tracked.size > 0) {
      throw new Error(`disagg cluster: ${this.tracked.size} request(s) unfinished at ${this.clock.now()} ms with no timer pending`);
    }
  }

  stats(): DisaggClusterStats {
    return { ...this.counters, inFlight: this.tracked.size };
  }

  private onInstanceFinished(index: number, f: FinishedRequest): void {
    const inst = this.list[index] as Instance;
    const t = this.tracked.get(f.requestId);
    if (!t) throw new Error(`disagg cluster: instance ${inst.index} finished unknown request ${f.requestId}`);
    this.release(inst, t, f);
    const now = this.clock.now();
    if (inst.role === "decode") {
      const first = t.first as FinishedRequest;
      this.deliver(t, {
        ...f,
        outputTokenIds: [...first.outputTokenIds, ...f.outputTokenIds],
        logprobs: [...first.logprobs, ...f.logprobs],
        numPreemptions: first.numPreemptions + f.numPreemptions,
        numPromptTokens: first.numPromptTokens,
        numCachedTokens: first.numCachedTokens,
      }, t.firstTokenTime as number);
      return;
    }
    const promptLen = t.req.promptTokenIds.length;
    // Ends here: a mixed instance ran it whole, or its first token already ended it (stop, abort,
    // max_tokens 1, or the context is full — the finish a mixed instance would have given it).
    const full = promptLen + 1 >= this.maxModelLen;
    if (inst.role === "mixed" || f.finishReason !== "length" || t.req.maxTokens === 1 || full) {
      const firstTokenTime = inst.role === "mixed" ? undefined : now;
      this.deliver(t, f, firstTokenTime);
      return;
    }
    t.first = f;
    t.firstTokenTime = now;
    this.handOff(inst, t, f);
  }

  /** Offload the prompt's full blocks to L3 over the prefill instance's link, then queue the decode. */
  private handOff(inst: Instance, t: Tracked, first: FinishedRequest): void {
    const tokens = [...t.req.promptTokenIds, ...first.outputTokenIds];
    // The prefill's KV was just released into the prefix cache (same clock instant): still in L1.
    const transfer = inst.kv.offloadPrefix(tokens, "L3");
    const bytes = transfer?.bytes ?? 0;
    const now = this.clock.now();
    const start = Math.max(now, inst.linkFreeAt);
    inst.linkFreeAt = start + (transfer ? transferTimeMs(this.profile, transfer) : 0);
    const offloadMs = inst.linkFreeAt - now;
    t.handoff = { blocksSent: transfer?.blocks ?? 0, bytesSent: bytes, offloadMs, decodeCachedTokens: 0 };
    this.counters.handoffs++;
    this.counters.handoffBlocksSent += transfer?.blocks ?? 0;
    this.counters.handoffBytesSent += bytes;
    this.counters.handoffMs += offloadMs;
    this.clock.setTimer(offloadMs, () => {
      const dec = this.leastLoaded("decode");
      const id = t.req.requestId;
      if (t.req.outputLength !== undefined) dec.executor.setOutputLength(id, t.req.outputLength - 1);
      const next: NewRequest = { ...withoutAnnotation(t.req), promptTokenIds: tokens, maxTokens: t.req.maxTokens - 1, arrivalTime: t.arrivalTime };
      dec.engine.submit(next);
      t.decodeInstance = dec.index;
      this.assign(dec, tokens.length);
    });
  }

  private deliver(t: Tracked, f: FinishedRequest, firstTokenTime: number | undefined): void {
    this.tracked.delete(t.req.requestId);
    this.counters.finished++;
    this.counters.inFlight = this.tracked.size;
    const now = this.clock.now();
    const out: ClusterFinishedRequest = {
      ...f,
      arrivalTime: t.arrivalTime,
      firstTokenTime: firstTokenTime ?? t.firstTokenTime ?? now,
      finishTime: now,
      prefillInstance: t.prefillInstance,
    };
    if (t.decodeInstance !== undefined) out.decodeInstance = t.decodeInstance;
    if (t.handoff !== undefined) out.handoff = t.handoff;
    this.o.onFinished?.(out);
  }

  private assign(inst: Instance, tokens: number): void {
    inst.outstanding++;
    inst.outstandingTokens += tokens;
  }

  private release(inst: Instance, t: Tracked, f: FinishedRequest): void {
    inst.outstanding--;
    inst.outstandingTokens -= f.numPromptTokens;
    // A mixed request's first token time is the scheduler's; a decode's cache hit is the handoff's payoff.
    if (inst.role === "mixed") {
      const st = inst.scheduler.requestState(f.requestId);
      if (st?.firstTokenTime !== undefined) t.firstTokenTime = st.firstTokenTime;
    }
    if (inst.role === "decode" && t.handoff) t.handoff.decodeCachedTokens = f.numCachedTokens;
  }

  /** Fewest outstanding requests, then fewest outstanding prompt tokens, then lowest index. */
  private leastLoaded(role: EngineRole): Instance {
    let best: Instance | undefined;
    for (const i of this.list) {
      if (i.role !== role) continue;
      if (!best || i.outstanding < best.outstanding || (i.outstanding === best.outstanding && i.outstandingTokens < best.outstandingTokens)) {
        best = i;
      }
    }
    if (!best) throw new Error(`disagg cluster: no ${role} instance (roles were validated)`);
    return best;
  }
}

function withoutAnnotation(req: ClusterRequest): NewRequest {
  const { outputLength: _omit, ...rest } = req;
  return rest;
}

function checkInt(field: string, v: number, min: number): void {
  if (!Number.isInteger(v) || v < min) throw new ArborError(`disagg cluster: ${field} must be an integer >= ${min}, got ${v}`, "config");
}

/** True for a prefill/decode cluster, false for an all-mixed one; ArborError otherwise. */
function validateRoles(roles: readonly EngineRole[]): boolean {
  if (!Array.isArray(roles) || roles.length === 0) throw new ArborError("disagg cluster: roles must list at least one instance", "config");
  for (const [i, r] of roles.entries()) {
    if (r !== "prefill" && r !== "decode" && r !== "mixed") {
      throw new ArborError(`disagg cluster: roles[${i}] must be "prefill", "decode" or "mixed", got ${JSON.stringify(r)}`, "config");
    }
  }
  const has = (r: EngineRole): boolean => roles.includes(r);
  if (has("mixed")) {
    if (has("prefill") || has("decode")) {
      throw new ArborError("disagg cluster: roles mixes \"mixed\" with \"prefill\"/\"decode\" instances; use all mixed, or prefill + decode", "config");
    }
    return false;
  }
  if (!has("prefill") || !has("decode")) {
    throw new ArborError("disagg cluster: roles needs at least one \"prefill\" and one \"decode\" instance (or all \"mixed\")", "config");
  }
  return true;
}
