// Simulated RL rollout: the real RolloutOrchestrator and a real scheduling policy placing requests
// (or chunks of them) on N cost-model engines (real KV block manager + vLLM-style scheduler) under
// one virtual clock, with a simulated trainer that takes batches, trains for trainStepMs and
// publishes new weights (engines reload for weightSyncMs; in async mode, chunks in flight are
// interrupted and continue on the new weights: partial rollout). Used by `arbor bench scheduling`.
import { VirtualClock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import { CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import { getCostProfile } from "../engine/costmodel/profile.js";
import { KvBlockManager } from "../engine/kv/block-manager.js";
import type { BlockHashChain } from "../engine/kv/block-hash.js";
import { InProcessKvTier } from "../engine/kv/tier.js";
import { Scheduler, type FinishedRequest, type NewRequest } from "../engine/scheduler/scheduler.js";
import type { StepPlan, StepResult } from "../engine/scheduler/step-plan.js";
import { SimEngine } from "../engine/sim-engine.js";
import { RolloutOrchestrator, type RolloutBatch, type RolloutMode } from "../rollout/orchestrator/orchestrator.js";
import { createRolloutScheduler } from "../rollout/scheduling/registry.js";
import type { InstanceView, Placement } from "../rollout/scheduling/types.js";
import { DraftBudget } from "../engine/specdec/draft-budget.js";
import { SiblingAcceptance, type GroupedSpeculation } from "./grouped-speculation.js";
import { RolloutTraceRecorder, type RolloutSimTrace, type TracedChunk } from "./rollout-trace.js";
import type { SeerTask } from "./seer-workload.js";

export type { RolloutSimTrace } from "./rollout-trace.js";

const STOP = 2;

export interface RolloutSimOptions {
  tasks: readonly SeerTask[];
  groupSize: number;
  /** Scheduling policy name (rollout/scheduling/registry.ts). */
  policy: string;
  /** Divided rollout chunk, tokens (policies that divide). */
  chunkTokens?: number;
  starvationMs?: number;
  /** Divided rollout: keep a continuation on its previous chunk's instance when it has room (default true). */
  kvAffinity?: boolean;
  mode: RolloutMode;
  /** Groups per training batch; in sync mode also per iteration. */
  batchGroups: number;
  /** Async: N, unconsumed groups at most. */
  maxInFlightGroups?: number;
  /** Async: W, groups. */
  window?: number;
  /** Async: η. */
  maxStaleness?: number;
  engines: number;
  /** L1 KV capacity of each engine, tokens. */
  kvTokensPerEngine: number;
  /** Sequences an engine runs at once (vLLM max_num_seqs). */
  maxNumSeqs: number;
  /** Cost profile of every engine (default llama-3-8b/h100). */
  profile?: string;
  /** Simulated training step, ms (0 = instant). */
  trainStepMs: number;
  /** Weight reload on every engine after a step, ms. */
  weightSyncMs: number;
  /** Stop after this many batches (default: the whole dataset). */
  maxBatches?: number;
  /** vLLM max_num_batched_tokens of every engine (default 8192). */
  maxNumBatchedTokens?: number;
  /**
   * Seer's grouped speculative decoding (off when absent): every engine verifies drafts with the adaptive
   * budget, accepting more as the request's siblings finish (their counts shared across engines, as
   * Seer's draft server shares each group's tree).
   */
  speculation?: GroupedSpeculation;
  /** Period of the time series (throughput buckets, KV usage, cumulative counters), simulated ms (default 1000). */
  sampleMs?: number;
  seed: number;
  /** Told each time a request has generated its last token, with how many have (for a progress display). */
  onRequestFinished?: (finished: number) => void;
}

/** One batch as the simulated trainer took it. */
export interface SimBatch {
  batch: RolloutBatch;
  /** Clock time the batch was taken, ms. */
  takenAtMs: number;
  /** Rollout time of the batch's requests: first placement to last finish, ms. */
  rolloutMs: number;
  /** Time from the 90th-percentile finish to the last (the last 10% of requests), ms. */
  tailMs: number;
}

export interface RolloutSimResult {
  batches: SimBatch[];
  /** Clock time when the last batch was taken, ms. */
  makespanMs: number;
  /** Output tokens in the batches taken. */
  outputTokens: number;
  preemptions: number;
  /** Context tokens computed again when a chunk continues a request (beyond its prefix-cache hit). */
  continuationPrefillTokens: number;
  /** Mean fraction of the makespan the engines spent in steps. */
  engineBusy: number;
  /** Chunks placed (= requests when the policy does not divide), and chunks interrupted by weight syncs. */
  chunks: number;
  interrupted: number;
  trace: RolloutSimTrace;
}

interface Node {
  name: string;
  kv: KvBlockManager;
  scheduler: Scheduler;
  executor: CostModelExecutor;
  engine: SimEngine;
  /** Chunks placed here and not ended, by engine request id. */
  chunks: Map<string, Chunk>;
}

interface Chunk {
  p: Placement;
  node: Node;
  /** prompt ‖ generated at placement, tokens. */
  context: number;
  version: number;
}

/** Run the rollout simulation; deterministic for its options. */
export function runRolloutSim(o: RolloutSimOptions): RolloutSimResult {
  if (!(Number.isInteger(o.engines) && o.engines >= 1)) throw new ArborError(`rollout sim: engines must be an integer >= 1, got ${o.engines}`, "config");
  if (!(Number.isInteger(o.maxNumSeqs) && o.maxNumSeqs >= 1)) throw new ArborError(`rollout sim: maxNumSeqs must be an integer >= 1, got ${o.maxNumSeqs}`, "config");
  const profile = getCostProfile(o.profile ?? "llama-3-8b/h100");
  const numBlocks = Math.floor(o.kvTokensPerEngine / profile.blockSize);
  const capacity = numBlocks * profile.blockSize;
  const longest = Math.max(...o.tasks.map((t) => t.promptTokens + t.maxTokens));
  if (capacity < longest + profile.blockSize) {
    throw new ArborError(`rollout sim: kvTokensPerEngine ${o.kvTokensPerEngine} cannot hold the longest request (${longest} tokens)`, "config");
  }
  const clock = new VirtualClock();
  const rng = new Rng(o.seed);
  const taskById = new Map(o.tasks.map((t) => [t.id, t]));
  const chunks = new Map<string, Chunk>();
  /**
   * Per request: its prompt ‖ the tokens generated so far, the next chunk's prompt (a view of the last chunk's
   * own token buffer: no concatenation per chunk). While a chunk runs, its engine appends in that buffer.
   */
  const contextOf = new Map<string, NewRequest["promptTokenIds"]>();
  /** Per request: the block hashes of its last chunk, which its next chunk continues (no rehashing of the context). */
  const hashesOf = new Map<string, BlockHashChain>();
  /** Per request: its true output length (the executor's stop annotation), its budget and its task's prompt. */
  const truth = new Map<string, { length: number; maxTokens: number; prompt: readonly number[] }>();
  /** Tokens generated so far by a request between its chunks (its context beyond its prompt). */
  const generatedOf = (requestId: string): number =>
    (contextOf.get(requestId) as NewRequest["promptTokenIds"]).length - (truth.get(requestId) as { prompt: readonly number[] }).prompt.length;
  const placedAt = new Map<string, number>();
  const finishedAt = new Map<string, number>();
  let engineVersion = 0;
  let syncingUntil = 0;
  let trainerBusy = false;
  let chunkSeq = 0;
  let interrupted = 0;
  let continuationPrefill = 0;
  let stopped = false;
  const recorder = new RolloutTraceRecorder(clock, o.sampleMs ?? 1000, Array.from({ length: o.engines }, (_, i) => `engine-${i}`));
  const trace = recorder.trace;
  /** Grouped speculation: each request's group, and each group's finished requests. */
  const groupOf = new Map<string, string>();
  const finishedInGroup = new Map<string, number>();
  const siblingAcceptance = o.speculation ? new SiblingAcceptance(o.speculation) : undefined;
  /** An engine request (`<request>#<chunk>`)'s acceptance rates, from its finished siblings. */
  const acceptanceOf = (engineId: string): readonly number[] | undefined => {
    // The chunk knows its request (asked at every verification: no id slicing).
    const group = groupOf.get(chunks.get(engineId)?.p.requestId ?? engineId.slice(0, engineId.lastIndexOf("#")));
    return group === undefined ? undefined : siblingAcceptance?.rates(finishedInGroup.get(group) ?? 0);
  };
  // The global KV pool (Mooncake, as Seer deploys): blocks evicted from an engine are written back
  // here and found by any engine, so a request that moves (or is preempted) loads its context at the
  // pool's bandwidth instead of recomputing it. Every policy runs on the same pool.
  const l3 = new InProcessKvTier({ name: "L3", capacityBlocks: numBlocks * o.engines * 16, bandwidthBytesPerMs: profile.l3BandwidthBytesPerMs });
  const nodes: Node[] = trace.engines.map((name) => {
    const kv = new KvBlockManager({ blockSize: profile.blockSize, numBlocks, enablePrefixCaching: true, bytesPerToken: profile.kvBytesPerToken, l3 });
    // A bounded run: token buffers in memory the collector's triggers do not count (TokenMemory), no logprobs.
    const scheduler = new Scheduler(
      { maxNumBatchedTokens: o.maxNumBatchedTokens ?? 8192, maxNumSeqs: o.maxNumSeqs, policy: "fcfs", enableChunkedPrefill: true, maxModelLen: capacity, stopTokenIds: [STOP], maxWaiting: 1_000_000, recordLogprobs: false, tokenMemory: "uncounted" },
      kv,
      clock,
      o.speculation ? new DraftBudget({ maxPositions: o.speculation.maxSpecTokens }) : undefined,
    );
    const speculation = o.speculation ? { maxSpecTokens: o.speculation.maxSpecTokens, acceptance: (siblingAcceptance as SiblingAcceptance).rates(0), acceptanceOf } : undefined;
    // No logprobs: the scheduler records none (recordLogprobs off above).
    const executor = new CostModelExecutor(profile, rng.fork(name), { vocabSize: 128_256, stopTokenIds: [STOP], logprobs: false, ...(speculation ? { speculation } : {}) });
    const node: Node = { name, kv, scheduler, executor, engine: undefined as unknown as SimEngine, chunks: new Map() };
    const run = (plan: StepPlan): StepResult => recorder.observeStep(node, plan, executor.run(plan), chunkOf);
    node.engine = new SimEngine({ scheduler, executor: { run }, clock, onFinished: (f) => onChunkDone(f) });
    return node;
  });
  const byName = new Map(nodes.map((n) => [n.name, n]));

  /** A chunk as the trace recorder sees it. */
  const chunkOf = (requestId: string): TracedChunk | undefined => {
    const c = chunks.get(requestId);
    return c === undefined ? undefined : { context: c.context, generatedBefore: c.p.generated };
  };

  /** One sample of the series per period while the run lasts. */
  const sample = (): void => {
    if (stopped) return;
    recorder.sample(nodes);
    // Only while something else is pending: a stuck run must still stop with "nothing scheduled".
    if (clock.pendingTimers > 0) clock.setTimer(trace.sampleMs, sample);
  };
  clock.setTimer(trace.sampleMs, sample);

  const orch = new RolloutOrchestrator({
    mode: o.mode,
    groupSize: o.groupSize,
    batchGroups: o.batchGroups,
    tasks: o.tasks,
    rng: rng.fork("dataset"),
    scheduler: createRolloutScheduler(o.policy, { chunkTokens: o.chunkTokens, starvationMs: o.starvationMs, kvAffinity: o.kvAffinity }),
    clock,
    maxInFlightGroups: o.maxInFlightGroups,
    window: o.window,
    maxStaleness: o.maxStaleness,
    onWeightSync: (v) => {
      // Partial rollout: chunks in flight stop now, keeping their tokens (made by the old weights).
      for (const [engineId, c] of [...chunks]) {
        const f = c.node.scheduler.abort(engineId);
        if (f === undefined) throw new ArborError(`rollout sim: ${engineId} was not in its engine`, "internal");
        interrupted++;
        onChunkDone(f);
      }
      engineVersion = v;
      syncingUntil = clock.now() + o.weightSyncMs;
      clock.setTimer(o.weightSyncMs, () => schedule());
    },
  });

  /** KV a node's chunks hold (running: their KV slots, grown by decoding) or will need (queued: their context). */
  const usedKv = (n: Node): number => {
    let u = 0;
    for (const [id, c] of n.chunks) u += Math.max(c.context, n.kv.numTokensOf(id));
    return u;
  };
  const views = (): InstanceView[] => nodes.map((n) => ({ name: n.name, kvCapacityTokens: capacity, usedKvTokens: usedKv(n), active: n.chunks.size, maxActive: o.maxNumSeqs }));

  const schedule = (): void => {
    if (stopped) return;
    for (const g of orch.pump()) {
      const task = taskById.get(g.taskId) as SeerTask;
      for (const r of g.requests) {
        contextOf.set(r.id, task.promptTokenIds);
        truth.set(r.id, { length: r.oracleLength as number, maxTokens: r.maxTokens, prompt: task.promptTokenIds });
        if (siblingAcceptance) groupOf.set(r.id, g.id);
      }
    }
    if (clock.now() < syncingUntil) return;
    for (const p of orch.next(views())) {
      const node = byName.get(p.instance) as Node;
      const prompt = contextOf.get(p.requestId) as NewRequest["promptTokenIds"];
      const engineId = `${p.requestId}#${chunkSeq++}`;
      const c: Chunk = { p, node, context: prompt.length, version: engineVersion };
      chunks.set(engineId, c);
      node.chunks.set(engineId, c);
      if (!placedAt.has(p.requestId)) placedAt.set(p.requestId, clock.now());
      const t = truth.get(p.requestId) as { length: number; prompt: readonly number[] };
      const remaining = t.length - generatedOf(p.requestId);
      if (remaining >= 1 && remaining <= p.maxTokens) node.executor.setOutputLength(engineId, remaining);
      const continues = hashesOf.get(p.requestId);
      // A context that came back from an engine (FinishedRequest.tokenIds) is this simulation's alone: handed
      // over, the engine appends in its buffer when it has room instead of copying it. (A task's prompt is its group's.)
      const handOverPrompt = prompt !== t.prompt;
      node.engine.submit({ requestId: engineId, promptTokenIds: prompt, maxTokens: p.maxTokens, priority: p.priority, handOverPrompt, ...(continues ? { continues } : {}) });
    }
    train();
  };

  let requestsFinished = 0;
  const onChunkDone = (f: FinishedRequest): void => {
    const c = chunks.get(f.requestId);
    if (c === undefined) throw new ArborError(`rollout sim: unknown chunk ${f.requestId} finished`, "internal");
    chunks.delete(f.requestId);
    c.node.chunks.delete(f.requestId);
    recorder.chunkEnded(f.requestId);
    // A continuation's context beyond its prefix-cache hit was computed again.
    if (c.p.generated > 0 && f.finishReason !== "abort") continuationPrefill += f.numPromptTokens - f.numCachedTokens;
    contextOf.set(c.p.requestId, f.tokenIds);
    const generated = generatedOf(c.p.requestId);
    hashesOf.set(c.p.requestId, f.blockHashes);
    const finished = f.finishReason === "stop";
    if (finished || generated === (truth.get(c.p.requestId) as { maxTokens: number }).maxTokens) {
      finishedAt.set(c.p.requestId, clock.now());
      o.onRequestFinished?.(++requestsFinished);
      // Never placed again: its tokens and block hashes go now, not when the batch is taken (at full scale
      // an iteration's outputs alone are 70M tokens).
      contextOf.delete(c.p.requestId);
      hashesOf.delete(c.p.requestId);
      const group = groupOf.get(c.p.requestId);
      if (group !== undefined) finishedInGroup.set(group, (finishedInGroup.get(group) ?? 0) + 1);
    }
    orch.onChunkEnd(c.p.requestId, f.outputTokenIds.length, c.version, finished);
    if (f.finishReason !== "abort") schedule();
  };

  const batches: SimBatch[] = [];
  const train = (): void => {
    if (trainerBusy || stopped) return;
    const batch = orch.takeBatch();
    if (batch === undefined) return;
    const ids = batch.groups.flatMap((g) => g.trajectories.map((t) => t.requestId));
    const ends = ids.map((id) => finishedAt.get(id) as number).sort((a, b) => a - b);
    const start = Math.min(...ids.map((id) => placedAt.get(id) as number));
    const last = ends[ends.length - 1] as number;
    batches.push({ batch, takenAtMs: clock.now(), rolloutMs: last - start, tailMs: last - (ends[Math.max(0, Math.ceil(ends.length * 0.9) - 1)] as number) });
    for (const id of ids) {
      if ((finishedAt.get(id) as number) < (placedAt.get(id) as number)) throw new ArborError(`rollout sim: ${id} ended before it was placed`, "internal");
      trace.completed++;
      trace.submittedMs.push(placedAt.get(id) as number);
      trace.endedMs.push(finishedAt.get(id) as number);
      contextOf.delete(id);
      hashesOf.delete(id);
      const group = groupOf.get(id);
      groupOf.delete(id);
      if (group !== undefined) finishedInGroup.delete(group);
      placedAt.delete(id);
      finishedAt.delete(id);
      truth.delete(id);
    }
    if (batches.length >= (o.maxBatches ?? Infinity) || orch.done()) {
      stopped = true;
      return;
    }
    trainerBusy = true;
    clock.setTimer(o.trainStepMs, () => {
      trainerBusy = false;
      orch.publishVersion(orch.version + 1);
      schedule();
    });
  };

  schedule();
  for (let i = 0; !stopped; i++) {
    if (i >= 50_000_000) throw new ArborError("rollout sim: did not finish within 50M events", "internal");
    if (!clock.step()) {
      throw new ArborError(`rollout sim: stuck at ${clock.now()} ms with nothing scheduled: ${JSON.stringify(orch.stats())}`, "internal");
    }
  }
  const makespanMs = clock.now();
  return {
    batches,
    makespanMs,
    outputTokens: batches.reduce((a, b) => a + b.batch.tokens, 0),
    preemptions: nodes.reduce((a, n) => a + n.scheduler.stats().preemptions, 0),
    continuationPrefillTokens: continuationPrefill,
    engineBusy: makespanMs === 0 ? 0 : nodes.reduce((a, n) => a + Math.min(n.engine.usage.busyMs, makespanMs), 0) / (nodes.length * makespanMs),
    chunks: chunkSeq,
    interrupted,
    trace,
  };
}
