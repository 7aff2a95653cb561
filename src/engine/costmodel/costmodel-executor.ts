// The `costmodel` executor: runs a step plan without computing any real token. Token ids and logprobs
// come from seeded random streams, output lengths from workload annotations, and the step's duration
// from the cost profile, so the simulator can drive the real scheduler under a virtual clock.
import { ArborError } from "../../core/errors.js";
import { RngBank, type Rng } from "../../core/rng.js";
import type { SampledTokenOut, ScheduledChunk, StepPlan, StepResult } from "../scheduler/step-plan.js";
import { validateCostProfile, type CostProfile } from "./profile.js";
import { stepTimeMs } from "./step-time.js";

export interface CostModelExecutorOptions {
  /** Token ids are drawn from 0..vocabSize-1. */
  vocabSize: number;
  /** Ids that end a generation; drawn only at the annotated output length. */
  stopTokenIds: number[];
  /** Modelled speculative decoding (off when absent): see ModelledSpeculation. */
  speculation?: ModelledSpeculation;
  /**
   * Report each token's logprob (default true). False: every logprob is 0, for a caller that records none (a
   * simulation whose scheduler has recordLogprobs off): the draw is still made, so the tokens are the same, but
   * not its logarithm (one per simulated token, ~1.5% of a full-scale seer-moonlight run).
   */
  logprobs?: boolean;
}

/**
 * Speculative decoding on the cost model. Every sampled request proposes `maxSpecTokens` draft tokens
 * for its next step; the scheduler plans them (budget, KV) and the step's time is the profile's for the
 * chunk it makes: a verification of k drafts is a (k + 1)-token chunk over the request's KV, costed as a
 * prefill chunk (step-time.ts). How many are accepted follows an acceptance model fitted to measured data
 * (`acceptance[i]`: P(position i + 1 accepted | position i accepted); positions past the list use its last
 * entry; `acceptanceForMeanLength` fits one rate to a measured mean acceptance length). Acceptance is drawn
 * from a stream of its own, so a request's tokens are the same with or without speculation.
 */
export interface ModelledSpeculation {
  maxSpecTokens: number;
  acceptance: readonly number[];
  /**
   * A request's own acceptance model, asked at each verification (undefined: `acceptance`). Seer's grouped
   * drafts accept more as a request's siblings finish (their whole responses join the group's tree), which
   * only the caller that knows the groups can tell (sim/rollout-sim.ts).
   */
  acceptanceOf?: (requestId: string) => readonly number[] | undefined;
}

/**
 * The constant per-position acceptance rate p whose expected accepted run with `maxSpecTokens` drafts gives
 * `meanLength` = 1 + Σ_{i=1..k} p^i tokens per verification step (vLLM's mean acceptance length), e.g. Seer's
 * measured 1.70 (no sibling) and 2.85 (15 siblings), or `arbor bench specdec`'s.
 */
export function acceptanceForMeanLength(meanLength: number, maxSpecTokens: number): number {
  if (!Number.isInteger(maxSpecTokens) || maxSpecTokens < 1) throw new ArborError(`acceptance: maxSpecTokens must be an integer >= 1, got ${maxSpecTokens}`, "config");
  if (!(meanLength >= 1 && meanLength <= 1 + maxSpecTokens)) {
    throw new ArborError(`acceptance: a mean acceptance length with ${maxSpecTokens} draft tokens is in [1, ${1 + maxSpecTokens}], got ${meanLength}`, "config");
  }
  const length = (p: number): number => {
    let sum = 1;
    let term = 1;
    for (let i = 0; i < maxSpecTokens; i++) sum += term *= p;
    return sum;
  };
  // length(p) rises monotonically from 1 (p = 0) to 1 + k (p = 1): bisection.
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (length(mid) < meanLength) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** An unused list (moreTokens, drafts without speculation): shared, frozen. */
const NO_LIST: never[] = Object.freeze([]) as unknown as never[];

// A request's state lives in its token stream's RngBank slot, beside the generator's words: the words below.
// At full scale the simulator samples for thousands of requests between two steps of one engine, so each
// request's state is a cache miss; in the slot it is the same miss as the draw's, not one more for an object.
/** Tokens sampled so far (kept across preemption: recompute does not redo sampling). */
const SAMPLED = 0;
/** The last run() that sampled for the request (a second chunk in the same plan is an error). */
const LAST_RUN = 1;
/** Annotated output length (stop token included); 0: none (an annotation is >= 1). */
const OUTPUT_LENGTH = 2;
/** The slot of the stream that draws its drafts' acceptance (apart from its tokens': they do not depend on speculation). */
const ACCEPT_SLOT = 3;
const STATE_WORDS = 4;

/** Executor that models time instead of computing tokens; deterministic for a seed. */
export class CostModelExecutor {
  readonly profile: CostProfile;
  private readonly vocabSize: number;
  /** Stop ids, sorted and deduplicated. */
  private readonly stops: number[];
  private readonly logprobs: boolean;
  /** Each request's slot in `bank` (its token stream, and its state: see SAMPLED and the words after it). */
  private readonly requests = new Map<string, number>();
  /** The requests' generators, one array for all (see RngBank): a slot each, released when the request finishes. */
  private readonly bank = new RngBank(STATE_WORDS);
  /**
   * The last run()'s chunks, by position: request id and slot. A running request keeps its place in a plan from
   * step to step, so its slot is found without hashing its id (a cold string at scale). Emptied whenever a
   * request is forgotten, so an entry always names a live slot.
   */
  private lastIds: string[] = [];
  private lastSlots: number[] = [];
  private readonly annotations = new Map<string, number>();
  private readonly speculation: ModelledSpeculation | undefined;
  /** The placeholder draft every sampled request proposes (a non-stop id; its value is never checked). */
  private readonly draft: number[] = [];
  /** Calls of run() so far (marks which requests a plan has sampled). */
  private runs = 0;

  constructor(
    profile: CostProfile,
    private readonly rng: Rng,
    opts: CostModelExecutorOptions,
  ) {
    this.profile = validateCostProfile(profile);
    if (!Number.isInteger(opts.vocabSize) || opts.vocabSize < 1) {
      throw new ArborError(`costmodel executor: vocabSize must be an integer >= 1 (got ${opts.vocabSize})`, "config");
    }
    for (const id of opts.stopTokenIds) {
      if (!Number.isInteger(id) || id < 0 || id >= opts.vocabSize) {
        throw new ArborError(`costmodel executor: stop token id ${id} is outside 0..${opts.vocabSize - 1}`, "config");
      }
    }
    this.vocabSize = opts.vocabSize;
    this.stops = [...new Set(opts.stopTokenIds)].sort((a, b) => a - b);
    this.logprobs = opts.logprobs ?? true;
    if (this.stops.length >= this.vocabSize) {
      throw new ArborError("costmodel executor: every token id is a stop token", "config");
    }
    const spec = opts.speculation;
    if (spec) {
      if (!Number.isInteger(spec.maxSpecTokens) || spec.maxSpecTokens < 1) {
        throw new ArborError(`costmodel executor: speculation.maxSpecTokens must be an integer >= 1 (got ${spec.maxSpecTokens})`, "config");
      }
      if (spec.acceptance.length === 0 || !spec.acceptance.every((p) => p >= 0 && p <= 1)) {
        throw new ArborError(`costmodel executor: speculation.acceptance must be a non-empty list of rates in [0, 1] (got ${JSON.stringify(spec.acceptance)})`, "config");
      }
      let filler = 0;
      while (this.stops.includes(filler)) filler++;
      this.draft = new Array<number>(spec.maxSpecTokens).fill(filler);
    }
    this.speculation = spec;
  }

  /**
   * Workload annotation: the request's n-th sampled token is a stop token (so it finishes with
   * reason `stop` after exactly n tokens). Without one, a request never samples a stop token and runs
   * to its max_tokens. Should a scheduler keep a request past n (ignoring the stop), later tokens are
   * non-stop again: finishing is the scheduler's decision, not the executor's.
   */
  setOutputLength(requestId: string, n: number): void {
    // (An int32 word of the request's bank slot holds it.)
    if (!Number.isInteger(n) || n < 1 || n > 0x7fffffff) {
      throw new ArborError(`costmodel executor: output length of ${requestId} must be an integer in 1..2147483647 (got ${n})`, "engine");
    }
    if (this.stops.length === 0) {
      throw new ArborError(`costmodel executor: output length of ${requestId} needs a stop token, and stopTokenIds is empty`, "engine");
    }
    this.annotations.set(requestId, n);
    const slot = this.requests.get(requestId);
    if (slot !== undefined) this.bank.setWord(slot, OUTPUT_LENGTH, n);
  }

  /**
   * Runs one step: forgets finished requests, samples one token for every chunk with `samples` (and,
   * for a verified draft, one more per accepted draft token), and reports the modelled duration
   * (stepTimeMs) and, with speculation, every sampled request's next draft.
   */
  run(plan: StepPlan): StepResult {
    // (An index loop: plan.finished is mostly a shared frozen empty list, over which for-of allocates.)
    for (let i = 0; i < plan.finished.length; i++) {
      const id = plan.finished[i] as string;
      const slot = this.requests.get(id);
      if (slot !== undefined) {
        this.bank.release(this.bank.word(slot, ACCEPT_SLOT));
        this.bank.release(slot);
        this.requests.delete(id);
        this.lastIds = [];
      }
      this.annotations.delete(id);
    }
    const durationMs = stepTimeMs(this.profile, plan);
    const { chunks } = plan;
    const run = ++this.runs;
    // Lists aligned with the chunks. `sampled`, which every step has, is sized once (filled by push, a list of a
    // few hundred grows through several arrays at every step); speculation's are filled by push.
    const sampled = new Array<SampledTokenOut | undefined>(chunks.length);
    const spec = this.speculation !== undefined;
    // Speculation's lists only when it is on (the simulator runs millions of steps without).
    const moreTokens: (SampledTokenOut[] | undefined)[] = spec ? [] : NO_LIST;
    const drafts: (number[] | undefined)[] = spec ? [] : NO_LIST;
    for (let k = 0; k < chunks.length; k++) {
      const c = chunks[k] as ScheduledChunk;
      if (!c.samples) {
        sampled[k] = undefined;
        if (spec) {
          moreTokens.push(undefined);
          drafts.push(undefined);
        }
        continue;
      }
      const slot = this.slotAt(k, c.requestId, run);
      if (this.bank.word(slot, LAST_RUN) === run) throw new ArborError(`step ${plan.stepId}: ${c.requestId} is scheduled twice`, "engine");
      this.bank.setWord(slot, LAST_RUN, run);
      sampled[k] = this.sample(slot);
      if (!spec) continue;
      const accepted = this.accepted(slot, c.requestId, c.draftTokenIds?.length ?? 0);
      let more: SampledTokenOut[] | undefined;
      if (accepted > 0) {
        // A loop, not Array.from: this runs for every verified draft of every step.
        more = [];
        for (let a = 0; a < accepted; a++) more.push(this.sample(slot));
      }
      moreTokens.push(more);
      drafts.push(this.draft);
    }
    return spec ? { stepId: plan.stepId, sampled, moreTokens, drafts, durationMs } : { stepId: plan.stepId, sampled, durationMs };
  }

  /** Draft tokens of a k-token draft the acceptance model accepts (a run from the first position). */
  private accepted(slot: number, requestId: string, k: number): number {
    if (k === 0 || !this.speculation) return 0;
    const rates = this.speculation.acceptanceOf?.(requestId) ?? this.speculation.acceptance;
    const acceptSlot = this.bank.word(slot, ACCEPT_SLOT);
    let a = 0;
    while (a < k && this.bank.float(acceptSlot) < (rates[Math.min(a, rates.length - 1)] as number)) a++;
    return a;
  }

  /** Requests the executor holds state for (annotated or sampled, not yet finished). */
  get trackedRequests(): number {
    return new Set([...this.requests.keys(), ...this.annotations.keys()]).size;
  }

  /** The slot of chunk `k`'s request, its state created at the first run() (`run`) that samples for it. */
  private slotAt(k: number, requestId: string, run: number): number {
    if (this.lastIds[k] === requestId) return this.lastSlots[k] as number;
    let slot = this.requests.get(requestId);
    if (slot === undefined) {
      // One stream per request: its tokens do not depend on what it was batched with.
      slot = this.bank.add(this.rng.forkSeed(`costmodel:${requestId}`));
      this.bank.setWord(slot, ACCEPT_SLOT, this.bank.add(this.rng.forkSeed(`costmodel-accept:${requestId}`)));
      this.bank.setWord(slot, LAST_RUN, run - 1);
      this.bank.setWord(slot, OUTPUT_LENGTH, this.annotations.get(requestId) ?? 0);
      this.requests.set(requestId, slot);
    }
    this.lastIds[k] = requestId;
    this.lastSlots[k] = slot;
    return slot;
  }

  private sample(slot: number): SampledTokenOut {
    const sampled = this.bank.word(slot, SAMPLED) + 1;
    this.bank.setWord(slot, SAMPLED, sampled);
    let tokenId: number;
    if (sampled === this.bank.word(slot, OUTPUT_LENGTH)) {
      tokenId = this.bank.pick(slot, this.stops);
    } else {
      // k-th non-stop id: walk the sorted stop ids, skipping each one at or below the candidate.
      tokenId = this.bank.int(slot, 0, this.vocabSize - this.stops.length - 1);
      for (const s of this.stops) {
        if (s <= tokenId) tokenId++;
        else break;
      }
    }
    // log of a uniform draw in (0, 1]: always <= 0.
    const u = this.bank.float(slot);
    return { tokenId, logprob: this.logprobs ? Math.log(1 - u) : 0 };
  }
}
