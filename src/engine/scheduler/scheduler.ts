// The built-in engine's request scheduler: an I/O-free state machine modelled on vLLM v1's
// Scheduler (token budget, max running sequences, chunked prefill, FCFS/priority queues,
// preemption by recompute). It decides each step's plan; executors run it and report back.

import type { Clock } from "../../core/clock.js";
import { ArborError, CapacityError } from "../../core/errors.js";
import { BlockHashChain, sliceTokens } from "../kv/block-hash.js";
import type { ComputedBlocks, KvBlockManager, KvRequestHandle } from "../kv/block-manager.js";
import type { StopRule } from "../sampling.js";
import type { DraftBudget, DraftCandidate } from "../specdec/draft-budget.js";
import { RequestQueue, compareQueued, type SchedulingPolicy } from "./request-queue.js";
import { ProgramTails } from "./program-tails.js";
import { MAX_INITIAL_ROOM, MAX_TOKEN_ID, adoptBuffer, bufferWithRoom, grownBuffer, type TokenMemory } from "./token-buffer.js";
import type { KvTransfer, SampledTokenOut, ScheduledChunk, StepPlan, StepResult } from "./step-plan.js";

/** Programs paused at once unless SchedulerConfig.maxPausedPrograms says otherwise. */
export const DEFAULT_MAX_PAUSED_PROGRAMS = 65_536;
/** The draft of a request with none: shared, never mutated (draft lists are only replaced or sliced). */
const NO_DRAFT: number[] = [];
/** No prefix-cache hits (a running request's allocation): shared, never mutated. */
const NO_BLOCKS: readonly number[] = [];
/**
 * A plan's empty lists (most steps preempt, finish and transfer nothing): shared, frozen, no arrays per step.
 * The simulator's per-step loops over such lists use an index: for-of over a frozen array allocates its
 * iterator and results even in optimized code (over a plain array it allocates nothing).
 */
const NO_IDS: string[] = Object.freeze([]) as unknown as string[];
const NO_TRANSFERS: KvTransfer[] = Object.freeze([]) as unknown as KvTransfer[];
const NO_FINISHED: FinishedRequest[] = Object.freeze([]) as unknown as FinishedRequest[];
const NO_REQS: Req[] = Object.freeze([]) as unknown as Req[];

export interface SchedulerConfig {
  /** Token budget per step (vLLM max_num_batched_tokens). */
  maxNumBatchedTokens: number;
  /** Max requests in the running set (vLLM max_num_seqs). */
  maxNumSeqs: number;
  policy: SchedulingPolicy;
  enableChunkedPrefill: boolean;
  /** Cap on one request's prefill chunk per step; 0/undefined = no cap (vLLM long_prefill_token_threshold). */
  longPrefillTokenThreshold?: number;
  /** Prompt + output tokens a request may reach. */
  maxModelLen: number;
  /** Sampling one of these ends the request with reason "stop" (the token is kept in the outputs). */
  stopTokenIds: number[];
  /** Bounded waiting queue: addRequest throws CapacityError beyond it. */
  maxWaiting: number;
  /**
   * Keep each sampled token's logprob (default true). A simulation that never reads them turns this off:
   * at full scale they are a double per output token of every request in flight (70M tokens: 0.5 GB), and
   * `FinishedRequest.logprobs` is then empty.
   */
  recordLogprobs?: boolean;
  /** Memory of the requests' token buffers (default "counted"; "uncounted" for a simulation: see TokenMemory). */
  tokenMemory?: TokenMemory;
  /**
   * Tokens of programs' last requests kept for pauses to move (ProgramTails; default 4× the KV cache's
   * tokens, more than it can still hold): beyond it the least recently finished program's go.
   */
  maxProgramTailTokens?: number;
  /** Programs paused at once (default 65,536): pauseProgram throws CapacityError beyond it. */
  maxPausedPrograms?: number;
}

export interface NewRequest {
  requestId: string;
  promptTokenIds: readonly number[] | Uint32Array;
  maxTokens: number;
  /** Lower = sooner, as vLLM. Default 0. */
  priority?: number;
  programId?: string;
  /** Default clock.now(). */
  arrivalTime?: number;
  /** The request's own stop tokens and min_tokens (default: config.stopTokenIds, no minimum). */
  stop?: StopRule;
  /**
   * The block hashes of a request this one continues (`FinishedRequest.blockHashes`; its prompt starts with
   * that request's tokens): the shared blocks are not hashed or verified again (BlockHashChain.continuedBy).
   */
  continues?: BlockHashChain;
  /**
   * The caller gives `promptTokenIds` up, a Uint32Array from the start of its buffer (`FinishedRequest.tokenIds`):
   * the scheduler appends the output in that buffer when it has room, so a continuation's context (tens of
   * thousands of tokens) is not copied again per chunk. The caller must not change that buffer from then on
   * (its `promptTokenIds` view still reads the same tokens). An array is copied as without it.
   */
  handOverPrompt?: boolean;
}

export type FinishReason = "stop" | "length" | "abort";

export interface FinishedRequest {
  requestId: string;
  outputTokenIds: number[];
  /**
   * The whole sequence, prompt ‖ output: a view of the request's own buffer, whose tokens the scheduler no
   * longer changes. A caller that continues the request hands it over as the next prompt (handOverPrompt)
   * instead of concatenating the prompt and the output again (a context of tens of thousands of tokens).
   */
  tokenIds: Uint32Array;
  logprobs: number[];
  finishReason: FinishReason;
  /** The stop token that ended the request (finishReason "stop"). */
  stopTokenId?: number;
  numPreemptions: number;
  programId?: string;
  numPromptTokens: number;
  /** Prompt tokens served from the prefix cache when the request was first scheduled. */
  numCachedTokens: number;
  /** The request's block hashes, for a request that continues it (NewRequest.continues). */
  blockHashes: BlockHashChain;
}

/** "preempted" requests sit in the waiting queue, like vLLM's PREEMPTED status. */
export type RequestStatus = "waiting" | "running" | "preempted" | "finished";

export interface RequestStateView {
  requestId: string;
  status: RequestStatus;
  outputTokenIds: number[];
  numPromptTokens: number;
  numComputedTokens: number;
  numPreemptions: number;
  numCachedTokens: number;
  priority: number;
  arrivalTime: number;
  programId?: string;
  /** True while waiting behind a paused program. */
  held: boolean;
  finishReason?: FinishReason;
  /** Clock time the request was first scheduled, and its first token sampled. */
  firstScheduledTime?: number;
  firstTokenTime?: number;
}

export interface SchedulerStats {
  running: number;
  /** Waiting requests, preempted and held ones included. */
  waiting: number;
  /** Waiting requests held back by a paused program. */
  held: number;
  /** Preemptions since start (vllm:num_preemptions_total). */
  preemptions: number;
  stepsScheduled: number;
  finished: number;
  aborted: number;
  pausedPrograms: number;
}

/** Where a paused program's KV goes. */
export type PauseTarget = "L2" | "L3" | "drop";

/** The part of the KV block manager the scheduler drives. */
export type SchedulerKv = Pick<
  KvBlockManager,
  | "blockSize"
  | "numBlocks"
  | "bytesPerToken"
  | "getComputedBlocks"
  | "allocateSlots"
  | "handleOf"
  | "touchRecords"
  | "trimSlots"
  | "free"
  | "offloadRequest"
  | "offloadPrefix"
  | "takeEvictionTransfers"
>;

interface Req {
  // Fields in the order onStepDone and schedule() read them for every token (the object literal in
  // addRequest keeps this order, and sets every field, so all of them live in the object itself: at scale
  // every running request is a cache miss per step, and a field added later would cost one more).
  status: RequestStatus;
  /** Prompt followed by the outputs so far (the first numTokens; room after them): what a resumed request recomputes. */
  tokenIds: Uint32Array;
  numTokens: number;
  numComputedTokens: number;
  numPromptTokens: number;
  maxTokens: number;
  stop: StopRule | undefined;
  finishReason: FinishReason | undefined;
  firstTokenTime: number | undefined;
  firstScheduledTime: number | undefined;
  /** Speculative decoding: the executor's draft for the next decode step (empty: none). */
  draftTokenIds: number[];
  /** While schedule() builds a plan: the tokens and the draft it gives this request (no map per step). */
  stepTokens: number;
  stepDraft: number[] | undefined;
  requestId: string;
  /** Its KV record while admitted (kv.handleOf): allocateSlots and touchRecords take it instead of looking the id up. */
  kvHandle: KvRequestHandle | undefined;
  /** Block hashes of `tokenIds`, kept as they grow: a request waiting for KV is looked up every step. */
  blockHashes: BlockHashChain;
  logprobs: number[];
  priority: number;
  arrivalTime: number;
  seq: number;
  programId: string | undefined;
  numPreemptions: number;
  numCachedTokens: number;
  stopTokenId: number | undefined;
}

/**
 * vLLM v1-style scheduler. One step at a time: `schedule()` returns a plan, the executor runs it,
 * `onStepDone()` feeds back the sampled tokens. There is no prefill or decode phase: each step every
 * request's computed tokens catch up with its token count within the budget.
 */
export class Scheduler {
  private readonly requests = new Map<string, Req>();
  private readonly waiting: RequestQueue<Req>;
  private running: Req[] = [];
  private nextSeq = 0;
  private nextStepId = 0;
  /** The last plan with chunks, until its result comes back, and its chunks' requests (reqs[k]: chunks[k]'s). */
  private inFlight: StepPlan | undefined;
  private inFlightReqs: Req[] = [];
  /** Finished since the previous plan; listed in the next plan's `finished`. */
  private finishedSincePlan: string[] = [];
  /** Aborted while holding KV: freed at the next schedule (the executor may still be using it). */
  private pendingFree: string[] = [];
  /** KV moves decided outside a step (program pauses), charged to the next plan. */
  private pendingTransfers: KvTransfer[] = [];
  private readonly pausedPrograms = new Map<string, PauseTarget>();
  private readonly maxPausedPrograms: number;
  /** Per program, the tokens of its last finished request, whose KV may still be cached (see pauseProgram). */
  private readonly programTails: ProgramTails;
  private numPreemptions = 0;
  /** Where the read-ahead loops (touchTails, touchRunning) leave their sum, so the reads are not dropped. */
  private touchSink = 0;
  /** config.stopTokenIds as a set, built once (onStepDone checks every sampled token against it). */
  private readonly stopIds: ReadonlySet<number>;
  private numFinished = 0;
  private readonly recordLogprobs: boolean;
  private numAborted = 0;

  constructor(
    readonly config: SchedulerConfig,
    private readonly kv: SchedulerKv,
    private readonly clock: Clock,
    /** Speculative decoding's adaptive budget (Seer): absent, every draft is verified in full. */
    private readonly draftBudget?: DraftBudget,
  ) {
    validateConfig(config);
    if (Math.ceil(config.maxModelLen / kv.blockSize) > kv.numBlocks) {
      // As vLLM at startup: a request of maxModelLen tokens must fit in KV alone, or it never finishes.
      throw new ArborError(
        `scheduler config: maxModelLen ${config.maxModelLen} needs ${Math.ceil(config.maxModelLen / kv.blockSize)} KV blocks ` +
          `of ${kv.blockSize} tokens but the KV cache has ${kv.numBlocks}`,
        "config",
      );
    }
    this.waiting = new RequestQueue<Req>(config.policy);
    this.programTails = new ProgramTails(config.maxProgramTailTokens ?? 4 * kv.numBlocks * kv.blockSize);
    this.maxPausedPrograms = config.maxPausedPrograms ?? DEFAULT_MAX_PAUSED_PROGRAMS;
    this.stopIds = new Set(config.stopTokenIds);
    this.recordLogprobs = config.recordLogprobs ?? true;
  }

  /**
   * Queue a request. Throws ArborError on bad input (field + reason) and CapacityError when the
   * waiting queue is full.
   */
  addRequest(req: NewRequest): void {
    const { requestId, promptTokenIds, maxTokens } = req;
    if (typeof requestId !== "string" || requestId === "") {
      throw new ArborError("addRequest: requestId must be a non-empty string", "invalid_request");
    }
    if (this.requests.has(requestId)) {
      throw new ArborError(`addRequest: requestId "${requestId}" is already in the scheduler`, "invalid_request");
    }
    if (!(Array.isArray(promptTokenIds) || promptTokenIds instanceof Uint32Array) || promptTokenIds.length === 0) {
      throw new ArborError(`addRequest ${requestId}: promptTokenIds must be a non-empty array`, "invalid_request");
    }
    // A loop, not every(): a continuation's prompt is its whole context (tens of thousands of tokens). (A
    // Uint32Array holds nothing else.)
    if (!(promptTokenIds instanceof Uint32Array)) {
      for (let i = 0; i < promptTokenIds.length; i++) {
        const t = promptTokenIds[i] as number;
        if (!(Number.isInteger(t) && t >= 0 && t <= MAX_TOKEN_ID)) {
          throw new ArborError(`addRequest ${requestId}: promptTokenIds must be integers in [0, 2^32), got ${t} at ${i}`, "invalid_request");
        }
      }
    }
    if (promptTokenIds.length >= this.config.maxModelLen) {
      throw new ArborError(
        `addRequest ${requestId}: prompt has ${promptTokenIds.length} tokens, leaving no room for output ` +
          `within maxModelLen ${this.config.maxModelLen}`,
        "invalid_request",
      );
    }
    if (!Number.isInteger(maxTokens) || maxTokens < 1) {
      throw new ArborError(`addRequest ${requestId}: maxTokens must be an integer >= 1, got ${maxTokens}`, "invalid_request");
    }
    if (req.programId !== undefined && (typeof req.programId !== "string" || req.programId === "")) {
      throw new ArborError(`addRequest ${requestId}: programId must be a non-empty string when given`, "invalid_request");
    }
    const priority = req.priority ?? 0;
    if (!Number.isFinite(priority)) {
      throw new ArborError(`addRequest ${requestId}: priority must be a finite number`, "invalid_request");
    }
    const arrivalTime = req.arrivalTime ?? this.clock.now();
    if (!Number.isFinite(arrivalTime)) {
      throw new ArborError(`addRequest ${requestId}: arrivalTime must be a finite number`, "invalid_request");
    }
    if (this.waiting.length >= this.config.maxWaiting) {
      throw new CapacityError("scheduler waiting queue", this.config.maxWaiting);
    }
    const room = Math.min(maxTokens, this.config.maxModelLen - promptTokenIds.length, MAX_INITIAL_ROOM);
    const memory = this.config.tokenMemory;
    const tokenIds = req.handOverPrompt === true && promptTokenIds instanceof Uint32Array ? adoptBuffer(promptTokenIds, room, memory) : bufferWithRoom(promptTokenIds, room, memory);
    const r: Req = {
      status: "waiting",
      tokenIds,
      numTokens: promptTokenIds.length,
      numComputedTokens: 0,
      numPromptTokens: promptTokenIds.length,
      maxTokens,
      stop: req.stop,
      finishReason: undefined,
      firstTokenTime: undefined,
      firstScheduledTime: undefined,
      draftTokenIds: [],
      stepTokens: 0,
      stepDraft: undefined,
      requestId,
      kvHandle: undefined,
      // Its own buffer, which the chain may keep reading (a caller's array may change after this call).
      blockHashes: req.continues?.continuedBy(tokenIds.subarray(0, promptTokenIds.length)) ?? new BlockHashChain(),
      logprobs: [],
      priority,
      arrivalTime,
      seq: this.nextSeq++,
      programId: req.programId,
      numPreemptions: 0,
      numCachedTokens: 0,
      stopTokenId: undefined,
    };
    this.requests.set(requestId, r);
    this.waiting.add(r);
  }

  /**
   * Finish a request with reason "abort"; it is listed in the next plan's `finished`. Its KV is
   * freed now, or at the next `schedule()` when the step in flight uses it (a token sampled for it
   * by that step is dropped).
   * Returns its final state, or undefined when the id is unknown or already finished.
   */
  abort(requestId: string): FinishedRequest | undefined {
    const r = this.requests.get(requestId);
    if (!r || r.status === "finished") return undefined;
    if (r.status === "running") {
      this.dropRunning(r);
      if (this.inFlight?.chunks.some((c) => c.requestId === requestId)) this.pendingFree.push(requestId);
      else this.kv.free(requestId);
    } else {
      this.waiting.remove(r);
    }
    r.finishReason = "abort";
    this.numAborted++;
    return this.finish(r);
  }

  /** Make the next step's plan (vLLM Scheduler.schedule). */
  schedule(): StepPlan {
    if (this.inFlight) {
      throw new Error(`schedule: step ${this.inFlight.stepId} is still in flight (call onStepDone first)`);
    }
    // The lists below are replaced only when used: the simulator schedules millions of steps, and most free,
    // preempt and transfer nothing (a step's garbage is what makes young-generation collections frequent).
    if (this.pendingFree.length > 0) {
      for (const id of this.pendingFree) this.kv.free(id);
      this.pendingFree = [];
    }

    const now = this.clock.now();
    const cfg = this.config;
    const threshold = cfg.longPrefillTokenThreshold ?? 0;
    let budget = cfg.maxNumBatchedTokens;
    let preempted: Req[] | undefined;
    /** The step's transfers so far (pause moves, then loads): pendingTransfers, handed to the plan when not empty. */
    const transfers: KvTransfer[] = this.pendingTransfers;
    /**
     * The requests scheduled this step, in plan order: running ones (a preemption may take one back), then
     * admitted ones. The plan's chunks follow it, and onStepDone reads a chunk's request from it.
     */
    const reqs: Req[] = [];

    // 1. RUNNING requests: decode steps and the rest of chunked prefills.
    const draftCaps = this.planDraftBudget(threshold);
    this.touchRunning();
    let i = 0;
    while (i < this.running.length && budget > 0) {
      const r = this.running[i] as Req;
      let n = r.numTokens - r.numComputedTokens;
      if (threshold > 0 && n > threshold) n = threshold;
      n = Math.min(n, budget, cfg.maxModelLen - 1 - r.numComputedTokens);
      if (n <= 0) {
        i++;
        continue;
      }
      // A decode step verifies the draft too: its positions take KV slots and budget, and it never
      // reaches past max_tokens or maxModelLen (a fully accepted run emits draft + 1 tokens).
      const draft = n === 1 ? draftFor(r, Math.min(budget - 1, draftCaps ? (draftCaps.get(r.requestId) ?? 0) : Infinity), cfg.maxModelLen - 2 - r.numComputedTokens) : [];
      n += draft.length;
      let ok = false;
      for (;;) {
        if (this.kv.allocateSlots(r.requestId, r.tokenIds, n, NO_BLOCKS, r.blockHashes, r.kvHandle, r.numTokens) !== null) {
          ok = true;
          break;
        }
        // Out of KV: preempt the lowest-priority running request, possibly `r` itself.
        const victim = this.pickVictim();
        const vi = this.running.indexOf(victim);
        this.running.splice(vi, 1);
        if (vi < i) i--; // keep `i` on `r`
        const k = reqs.indexOf(victim);
        if (k >= 0) {
          // Already scheduled this step (priority policy): take its tokens back.
          reqs.splice(k, 1);
          budget += victim.stepTokens;
          victim.stepTokens = 0;
          victim.stepDraft = undefined;
        }
        this.preempt(victim);
        (preempted ??= []).push(victim);
        if (victim === r) break;
      }
      if (!ok) break;
      reqs.push(r);
      r.stepTokens = n;
      // Stored only when it changes, as the draft in onStepDone (nearly always undefined, and left so).
      const stepDraft = draft.length > 0 ? draft : undefined;
      if (r.stepDraft !== stepDraft) r.stepDraft = stepDraft;
      budget -= n;
      i++;
    }

    // 2. WAITING requests, only when this step preempted nothing (as vLLM).
    if (preempted === undefined) {
      let w = 0;
      while (w < this.waiting.length && budget > 0) {
        if (this.running.length >= cfg.maxNumSeqs) break;
        const r = this.waiting.at(w) as Req;
        if (r.programId !== undefined && this.pausedPrograms.has(r.programId)) {
          w++;
          continue;
        }
        const hit = this.kv.getComputedBlocks(r.tokenIds, r.blockHashes, r.numTokens);
        const numCached = hit.numCachedTokens;
        let n = r.numTokens - numCached;
        if (threshold > 0 && n > threshold) n = threshold;
        if (!cfg.enableChunkedPrefill && n > budget) break;
        n = Math.min(n, budget);
        if (n <= 0) throw new Error(`schedule: request ${r.requestId} has nothing to compute (cache hit covers it)`);
        // The lookup has already loaded L2/L3 hits into L1, whether or not the request is admitted.
        for (let j = 0; j < hit.fromTier.length; j++) {
          const t = hit.fromTier[j] as ComputedBlocks["fromTier"][number];
          transfers.push({ from: t.tier, to: "L1", blocks: t.blocks, bytes: t.blocks * this.kv.blockSize * this.kv.bytesPerToken });
        }
        const blocks = this.kv.allocateSlots(r.requestId, r.tokenIds, n, hit.blockIds, r.blockHashes, undefined, r.numTokens);
        if (blocks === null) break;
        r.kvHandle = this.kv.handleOf(r.requestId);
        this.waiting.removeAt(w);
        if (r.status === "waiting") r.numCachedTokens = numCached;
        r.status = "running";
        r.numComputedTokens = numCached;
        this.running.push(r);
        reqs.push(r);
        r.stepTokens = n;
        r.stepDraft = undefined;
        budget -= n;
      }
    }

    // 3. Build the plan and advance computed tokens now, so chunked prefills continue next step.
    // Sized once: filled by push, a list of a few hundred chunks grows through several arrays at every step.
    const chunks: ScheduledChunk[] = new Array<ScheduledChunk>(reqs.length);
    let numBatchedTokens = 0;
    for (let k = 0; k < reqs.length; k++) {
      const r = reqs[k] as Req;
      const n = r.stepTokens;
      const draft = r.stepDraft;
      const before = r.numComputedTokens;
      r.numComputedTokens += n;
      r.firstScheduledTime ??= now;
      const chunk: ScheduledChunk = {
        requestId: r.requestId,
        numNewTokens: n,
        numComputedTokens: before,
        samples: r.numComputedTokens === r.numTokens + (draft?.length ?? 0),
      };
      if (draft) chunk.draftTokenIds = draft;
      chunks[k] = chunk;
      numBatchedTokens += n;
    }
    const evicted = this.kv.takeEvictionTransfers();
    for (let j = 0; j < evicted.length; j++) transfers.push(evicted[j] as KvTransfer);
    const finished = this.finishedSincePlan;
    const plan: StepPlan = {
      stepId: this.nextStepId++,
      now,
      chunks,
      numBatchedTokens,
      preempted: preempted === undefined ? NO_IDS : preempted.map((r) => r.requestId),
      finished: finished.length === 0 ? NO_IDS : finished,
      transfers: transfers.length === 0 ? NO_TRANSFERS : transfers,
    };
    if (finished.length > 0) {
      this.finishedSincePlan = [];
      for (const id of finished) this.requests.delete(id);
    }
    if (transfers.length > 0) this.pendingTransfers = [];
    if (chunks.length > 0) {
      this.inFlight = plan;
      this.inFlightReqs = reqs;
    }
    return plan;
  }

  /**
   * Feed back one step's sampled tokens (vLLM update_from_output): append them, detect stop and
   * length finishes, free finished requests' KV. Returns the requests that finished in this step.
   */
  onStepDone(result: StepResult): FinishedRequest[] {
    const plan = this.inFlight;
    if (!plan) throw new Error(`onStepDone: no step in flight (got stepId ${result.stepId})`);
    if (result.stepId !== plan.stepId) {
      throw new Error(`onStepDone: expected stepId ${plan.stepId}, got ${result.stepId}`);
    }
    const reqs = this.inFlightReqs;
    // Validate before mutating, so a bad result leaves the scheduler untouched. (A request aborted while
    // the step ran is finished; one added again under its id since is another, waiting request.)
    const { chunks } = plan;
    const { sampled, moreTokens, drafts } = result;
    for (let k = 0; k < chunks.length; k++) {
      const c = chunks[k] as ScheduledChunk;
      const r = reqs[k] as Req;
      const first = sampled[k];
      if (c.samples && r.status !== "finished" && first === undefined) {
        throw new Error(`onStepDone: step ${result.stepId} has no sampled token for request ${c.requestId}`);
      }
      // A token id outside [0, 2^32) would be stored wrapped (the request's tokens are a Uint32Array).
      if (first !== undefined && first.tokenId >>> 0 !== first.tokenId) badToken(result.stepId, c.requestId, first.tokenId);
      const more = moreTokens?.[k];
      if (more !== undefined) {
        if (more.length > (c.draftTokenIds?.length ?? 0)) {
          throw new Error(`onStepDone: step ${result.stepId} reports ${more.length + 1} tokens for request ${c.requestId}, more than its ${c.draftTokenIds?.length ?? 0} draft tokens + 1`);
        }
        for (const s of more) if (s.tokenId >>> 0 !== s.tokenId) badToken(result.stepId, c.requestId, s.tokenId);
      }
    }
    this.inFlight = undefined;
    this.inFlightReqs = NO_REQS;
    this.observeDraftBudget(plan, result);
    const now = this.clock.now();
    /** The requests finished by this step (most steps finish none: the shared empty list then). */
    let done: FinishedRequest[] | undefined;
    const stop = this.stopIds;
    this.touchTails(reqs);
    for (let k = 0; k < chunks.length; k++) {
      const c = chunks[k] as ScheduledChunk;
      const r = reqs[k] as Req;
      // Aborted (or preempted and re-admitted elsewhere) while the step ran: drop its token.
      if (r.status !== "running" || !c.samples) continue;
      const first = sampled[k];
      if (!first) continue;
      r.firstTokenTime ??= now;
      // A verified draft gives several tokens: each is checked as if sampled alone, so a stop or a
      // length cap inside the run ends the request there and drops the tokens after it.
      const more = moreTokens?.[k];
      // Index loop over first ‖ more: no array per token (the simulator runs this for every token).
      for (let t = 0, n = 1 + (more?.length ?? 0); t < n; t++) {
        const s = t === 0 ? first : ((more as SampledTokenOut[])[t - 1] as SampledTokenOut);
        if (r.numTokens === r.tokenIds.length) r.tokenIds = grownBuffer(r.tokenIds, r.numTokens);
        r.tokenIds[r.numTokens++] = s.tokenId;
        if (this.recordLogprobs) r.logprobs.push(s.logprob);
        const numOutputs = r.numTokens - r.numPromptTokens;
        // vLLM check_stop order: stop tokens first, then length caps.
        if (r.stop ? r.stop.stopsAt(s.tokenId, numOutputs) : stop.has(s.tokenId)) {
          r.finishReason = "stop";
          r.stopTokenId = s.tokenId;
        } else if (numOutputs >= r.maxTokens || r.numTokens >= this.config.maxModelLen) {
          r.finishReason = "length";
        }
        if (r.finishReason) break;
      }
      if (c.draftTokenIds && !r.finishReason) {
        // Rejected draft positions hold no valid KV: everything but the last token is computed.
        r.numComputedTokens = r.numTokens - 1;
        this.kv.trimSlots(r.requestId, r.numComputedTokens);
      }
      // Stored only when it changes: a pointer store into a request's (old, cold) object runs the write
      // barrier, which reads the header of the object's memory page, one more cache miss per request per step.
      const draft = r.finishReason ? NO_DRAFT : (drafts?.[k] ?? NO_DRAFT);
      if (r.draftTokenIds !== draft) r.draftTokenIds = draft;
      if (r.finishReason) {
        this.dropRunning(r);
        this.releaseKv(r);
        (done ??= []).push(this.finish(r));
      }
    }
    return done ?? NO_FINISHED;
  }

  /**
   * Reads each request's last token before the step's results are applied: the loads of one request do
   * not wait on another's, so the processor fetches many requests' lines at once, where onStepDone's loop
   * would wait for each request's object, token array and its tail in turn. At scale (32 engines stepping
   * in between) they are all cache misses: ~4% of a full-scale seer-moonlight step, with touchRunning ~5–7%,
   * measured step by step in one run (each step drew at random whether it read ahead). Changes nothing.
   */
  private touchTails(reqs: readonly Req[]): void {
    let sum = 0;
    for (let k = 0; k < reqs.length; k++) {
      const r = reqs[k] as Req;
      sum += r.tokenIds[r.numTokens - 1] ?? 0;
    }
    this.touchSink = sum;
  }

  /** touchTails for schedule(): the running requests' objects, token counts and KV records, read ahead. */
  private touchRunning(): void {
    const running = this.running;
    let sum = 0;
    for (let k = 0; k < running.length; k++) {
      const r = running[k] as Req;
      sum += r.numTokens - r.numComputedTokens;
    }
    this.touchSink = sum + this.kv.touchRecords(running);
  }

  /**
   * The adaptive budget's draft length for each running decode request with a draft (undefined:
   * no budget, or no drafts). The step's other tokens are estimated from the running requests alone.
   */
  private planDraftBudget(threshold: number): Map<string, number> | undefined {
    if (!this.draftBudget || !this.running.some((r) => r.draftTokenIds.length > 0)) return undefined;
    let baseTokens = 0;
    let sampling = 0;
    const candidates: DraftCandidate[] = [];
    for (const r of this.running) {
      const left = r.numTokens - r.numComputedTokens;
      baseTokens += threshold > 0 ? Math.min(left, threshold) : left;
      if (left !== 1) continue;
      sampling++;
      if (r.draftTokenIds.length > 0) candidates.push({ requestId: r.requestId, available: r.draftTokenIds.length, outputTokens: r.numTokens - r.numPromptTokens });
    }
    const base = Math.min(baseTokens, this.config.maxNumBatchedTokens);
    return this.draftBudget.plan(candidates, base, sampling, this.config.maxNumBatchedTokens - base);
  }

  /** Feed a finished step's time and its drafts' acceptance to the adaptive budget. */
  private observeDraftBudget(plan: StepPlan, result: StepResult): void {
    if (!this.draftBudget) return;
    this.draftBudget.observeStep(plan.numBatchedTokens, result.durationMs);
    for (let k = 0; k < plan.chunks.length; k++) {
      const drafted = (plan.chunks[k] as ScheduledChunk).draftTokenIds?.length ?? 0;
      if (drafted > 0 && result.sampled[k] !== undefined) this.draftBudget.observeDraft(drafted, result.moreTokens?.[k]?.length ?? 0);
    }
  }

  /** True while any request is waiting or running (held ones included). */
  hasUnfinished(): boolean {
    return this.running.length > 0 || this.waiting.length > 0;
  }

  stats(): SchedulerStats {
    let held = 0;
    for (const r of this.waiting) if (this.isHeld(r)) held++;
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      held,
      preemptions: this.numPreemptions,
      stepsScheduled: this.nextStepId,
      finished: this.numFinished,
      aborted: this.numAborted,
      pausedPrograms: this.pausedPrograms.size,
    };
  }

  /** Output tokens a request has so far (0 when unknown), without copying them as requestState does. */
  numOutputTokensOf(requestId: string): number {
    const r = this.requests.get(requestId);
    return r === undefined ? 0 : r.numTokens - r.numPromptTokens;
  }

  /** A request's state; finished requests are kept until the plan that lists them as finished. */
  requestState(requestId: string): RequestStateView | undefined {
    const r = this.requests.get(requestId);
    if (!r) return undefined;
    const view: RequestStateView = {
      requestId: r.requestId,
      status: r.status,
      outputTokenIds: sliceTokens(r.tokenIds, r.numPromptTokens, r.numTokens),
      numPromptTokens: r.numPromptTokens,
      numComputedTokens: r.numComputedTokens,
      numPreemptions: r.numPreemptions,
      numCachedTokens: r.numCachedTokens,
      priority: r.priority,
      arrivalTime: r.arrivalTime,
      held: r.status !== "finished" && r.status !== "running" && this.isHeld(r),
    };
    if (r.programId !== undefined) view.programId = r.programId;
    if (r.finishReason !== undefined) view.finishReason = r.finishReason;
    if (r.firstScheduledTime !== undefined) view.firstScheduledTime = r.firstScheduledTime;
    if (r.firstTokenTime !== undefined) view.firstTokenTime = r.firstTokenTime;
    return view;
  }

  /**
   * Pause a program (ThunderAgent), kept simple: its waiting requests are held back from admission
   * until `restoreProgram`; running ones are not interrupted. Its KV goes to tier `to`, charged to
   * the next plan: the cached prefix of its last finished request now (`kv.offloadPrefix`), and a
   * request still running when it finishes (`kv.offloadRequest` instead of `free`). "drop" (or a
   * tier the KV manager lacks) just leaves the blocks free in L1, where LRU eviction reclaims them.
   */
  pauseProgram(programId: string, to: PauseTarget): void {
    if (to !== "L2" && to !== "L3" && to !== "drop") {
      throw new ArborError(`pauseProgram ${programId}: to must be "L2", "L3" or "drop", got ${String(to)}`, "invalid_request");
    }
    if (this.pausedPrograms.size >= this.maxPausedPrograms && !this.pausedPrograms.has(programId)) {
      throw new CapacityError("the engine's paused programs (scheduler maxPausedPrograms)", this.maxPausedPrograms);
    }
    this.pausedPrograms.set(programId, to);
    const last = this.programTails.take(programId);
    if (last !== undefined && to !== "drop") {
      const t = this.kv.offloadPrefix(last, to);
      if (t && t.blocks > 0) this.pendingTransfers.push(t);
    }
  }

  /** Resume a paused program: its waiting requests compete for admission again (its KV is found
   * in L2/L3 by the prefix-cache lookup, which charges the load). Unknown programs are ignored. */
  restoreProgram(programId: string): void {
    this.pausedPrograms.delete(programId);
  }

  /** Forget a program that has ended: its pause and its last request's tokens (bounded memory). */
  endProgram(programId: string): void {
    this.pausedPrograms.delete(programId);
    this.programTails.delete(programId);
  }

  /** Whether a program is paused, and where its KV went. */
  programPause(programId: string): PauseTarget | undefined {
    return this.pausedPrograms.get(programId);
  }

  private isHeld(r: Req): boolean {
    return r.programId !== undefined && this.pausedPrograms.has(r.programId);
  }

  /**
   * Takes `r` out of the running list. A method rather than a filter in onStepDone: a closure there that
   * reads the loop's `r` has V8 allocate the loop body's scope for every request of every step (~40 bytes per
   * simulated token, 10% of a seer-moonlight run's young-generation allocation).
   */
  private dropRunning(r: Req): void {
    const i = this.running.indexOf(r);
    if (i >= 0) this.running.splice(i, 1);
  }

  /** vLLM: the last running request under FCFS, the max (priority, arrival) one under priority. */
  private pickVictim(): Req {
    if (this.config.policy === "fcfs") return this.running[this.running.length - 1] as Req;
    let v = this.running[0] as Req;
    for (const r of this.running) if (compareQueued(r, v) > 0) v = r;
    return v;
  }

  /** Preemption by recompute: free KV, forget computed tokens, back to the front of the queue. */
  private preempt(r: Req): void {
    this.kv.free(r.requestId);
    r.kvHandle = undefined;
    r.status = "preempted";
    r.numComputedTokens = 0;
    r.draftTokenIds = [];
    r.numPreemptions++;
    this.numPreemptions++;
    this.waiting.prepend(r);
  }

  /** Free a finished request's KV; a paused program's goes to its pause tier instead. */
  private releaseKv(r: Req): void {
    const pid = r.programId;
    const to = pid === undefined ? undefined : this.pausedPrograms.get(pid);
    if (to === "L2" || to === "L3") {
      // offloadRequest releases the request's blocks itself; null = no such tier, free as usual.
      const t = this.kv.offloadRequest(r.requestId, to);
      if (t) {
        if (t.blocks > 0) this.pendingTransfers.push(t);
        return;
      }
    } else if (pid !== undefined && to === undefined) {
      this.programTails.set(pid, r.tokenIds.subarray(0, r.numTokens));
    }
    this.kv.free(r.requestId);
  }

  private finish(r: Req): FinishedRequest {
    r.status = "finished";
    r.kvHandle = undefined;
    this.numFinished++;
    this.finishedSincePlan.push(r.requestId);
    const out: FinishedRequest = {
      requestId: r.requestId,
      outputTokenIds: sliceTokens(r.tokenIds, r.numPromptTokens, r.numTokens),
      tokenIds: r.tokenIds.subarray(0, r.numTokens),
      logprobs: r.logprobs.slice(),
      finishReason: r.finishReason as FinishReason,
      numPreemptions: r.numPreemptions,
      numPromptTokens: r.numPromptTokens,
      numCachedTokens: r.numCachedTokens,
      blockHashes: r.blockHashes,
    };
    if (r.stopTokenId !== undefined) out.stopTokenId = r.stopTokenId;
    if (r.programId !== undefined) out.programId = r.programId;
    return out;
  }
}

function badToken(stepId: number, requestId: string, tokenId: number): never {
  throw new Error(`onStepDone: step ${stepId} sampled token ${tokenId} for request ${requestId}: token ids are integers in [0, 2^32)`);
}

/**
 * The part of a running request's draft its next decode step verifies: at most `room` tokens (the
 * step's budget and the model length left), and never past max_tokens: a run emits draft + 1 tokens.
 */
function draftFor(r: Req, room: number, roomInModel: number): number[] {
  // Without a draft (most decode steps): the shared empty one, no array per request per step.
  if (r.draftTokenIds.length === 0) return NO_DRAFT;
  const outputsLeft = r.maxTokens - (r.numTokens - r.numPromptTokens);
  const k = Math.min(r.draftTokenIds.length, room, roomInModel, outputsLeft - 1);
  return k > 0 ? r.draftTokenIds.slice(0, k) : NO_DRAFT;
}

function validateConfig(c: SchedulerConfig): void {
  const posInt = (name: keyof SchedulerConfig, v: unknown, min: number): void => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
      throw new ArborError(`scheduler config: ${name} must be an integer >= ${min}, got ${String(v)}`, "config");
    }
  };
  posInt("maxNumBatchedTokens", c.maxNumBatchedTokens, 1);
  posInt("maxNumSeqs", c.maxNumSeqs, 1);
  posInt("maxModelLen", c.maxModelLen, 2);
  posInt("maxWaiting", c.maxWaiting, 1);
  if (c.longPrefillTokenThreshold !== undefined) posInt("longPrefillTokenThreshold", c.longPrefillTokenThreshold, 0);
  if (c.maxProgramTailTokens !== undefined) posInt("maxProgramTailTokens", c.maxProgramTailTokens, 0);
  if (c.maxPausedPrograms !== undefined) posInt("maxPausedPrograms", c.maxPausedPrograms, 1);
  if (c.policy !== "fcfs" && c.policy !== "priority") {
    throw new ArborError(`scheduler config: policy must be "fcfs" or "priority", got ${String(c.policy)}`, "config");
  }
  if (c.tokenMemory !== undefined && c.tokenMemory !== "counted" && c.tokenMemory !== "uncounted") {
    throw new ArborError(`scheduler config: tokenMemory must be "counted" or "uncounted", got ${String(c.tokenMemory)}`, "config");
  }
  if (!Array.isArray(c.stopTokenIds) || !c.stopTokenIds.every((t) => Number.isInteger(t))) {
    throw new ArborError("scheduler config: stopTokenIds must be an array of integer token ids", "config");
  }
  if (!c.enableChunkedPrefill && c.maxNumBatchedTokens < c.maxModelLen) {
    // As vLLM: without chunking a prompt must fit one step's budget, or it would wait forever.
    throw new ArborError(
      `scheduler config: maxNumBatchedTokens (${c.maxNumBatchedTokens}) must be >= maxModelLen ` +
        `(${c.maxModelLen}) when enableChunkedPrefill is false`,
      "config",
    );
  }
}
