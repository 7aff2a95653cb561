// A simulated gateway cluster: N cost-model engines (real KV block manager + scheduler) on one
// virtual clock behind the gateway's production call path (call-path.ts: program table, pause
// gate, router, the same calls in the same order as the HTTP gateway makes them), with the
// production router built from a routing preset and, optionally, the production PauseGate holding
// and releasing calls and pausing programs on the engines. Only the engines and the agents are
// simulated. Used by `arbor bench pausing` to compare routers with and without ThunderAgent pausing,
// and by `arbor sim` on agent workloads (src/sim/scenario/agent-scenario.ts), which also reads the
// time series and program end times recorded here.
import { Registry } from "prom-client";
import { VirtualClock, type Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import { CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import { getCostProfile } from "../engine/costmodel/profile.js";
import { KvBlockManager } from "../engine/kv/block-manager.js";
import { InProcessKvTier } from "../engine/kv/tier.js";
import { Scheduler, type PauseTarget } from "../engine/scheduler/scheduler.js";
import type { StepPlan } from "../engine/scheduler/step-plan.js";
import { SimEngine, type StepExecutor } from "../engine/sim-engine.js";
import { callRecorded, programForgotten, runCall, type CallPath } from "../gateway/call-path.js";
import type { CallGate } from "../gateway/pausing/call-gate.js";
import { PauseGate, type PauseGateConfig } from "../gateway/pausing/pause-gate.js";
import { ProgramTable } from "../gateway/program-table.js";
import { createPluginRouter, resolveRoutingConfig } from "../gateway/routing/registry.js";
import type { AgentProgramSpec } from "./agent-workload.js";
import type { SeriesPoint } from "./scenario/sim-report.js";
import { commonPrefix } from "../core/common-prefix.mjs";
import { settleUntilIdle } from "./settle.js";
import { SimBackend } from "./sim-backend.js";

const VOCAB = 128_256; // Llama-3
const STOP = 2;

export interface GatewaySimOptions {
  /** Engines in the cluster (named engine-0 … engine-(n−1)). */
  engines: number;
  /** L1 KV capacity of each engine, tokens (rounded down to whole blocks). */
  kvTokensPerEngine: number;
  /** Routing preset name (`routingPresets`: least-load, sticky-program, prefix-affinity, cost-aware, ...). */
  routing: string;
  /** Run the gateway's PauseGate (true = defaults, or the gateway's `pausing` settings); false/undefined = no pausing. */
  pausing?: boolean | Omit<PauseGateConfig, "capacities">;
  /** Cost profile of every engine. Default llama-3-8b/h100. */
  profile?: string;
  /** How often engine metrics are scraped into the router and KV usage is sampled, ms. Default 1000. */
  scrapeMs?: number;
  /**
   * Each engine's host-memory KV tier (L2), in tokens (whole blocks): evicted cached blocks are
   * offloaded there and loaded back at the profile's PCIe bandwidth instead of being recomputed.
   * Default: no L2.
   */
  l2TokensPerEngine?: number;
  /** Where the engine puts a paused program's KV: "drop" (default; left evictable in L1) or "L2". */
  pauseTo?: PauseTarget;
  /** Most sequences an engine runs at once (vLLM max_num_seqs). Default 256. */
  maxNumSeqs?: number;
  seed: number;
  /** Told each time a program ends, with how many have (a progress display; it changes nothing in the run). */
  onProgramEnded?: (ended: number) => void;
}

/** Time series sampled every `scrapeMs` (cumulative counters are running totals since the start). */
export interface GatewaySimSeries {
  /** Output tokens sampled by all engines, cumulative. */
  outputTokens: SeriesPoint[];
  /** Fraction of each engine's KV blocks in use, by engine name. */
  kvUsage: Record<string, SeriesPoint[]>;
  preemptions: SeriesPoint[];
  /** Prompt tokens computed so far minus the unique prompt tokens submitted so far. */
  recomputedTokens: SeriesPoint[];
}

export interface GatewaySimResult {
  programs: number;
  /** Agent turns (model calls) completed. */
  turns: number;
  /** Clock time when the last program finished, ms. */
  makespanMs: number;
  /** Turns per simulated minute. */
  stepsPerMin: number;
  /** Prompt tokens the engines had to compute at least once: the shared system prompt once, each
   * program's task, every tool output, and the last output token of every non-final turn. */
  uniquePromptTokens: number;
  /** Prompt tokens computed (prefill, recompute after eviction or preemption, engine switches). */
  promptTokensComputed: number;
  /** promptTokensComputed − uniquePromptTokens. */
  recomputeTokens: number;
  preemptions: number;
  /** Per engine: mean fraction of KV blocks in use over the sampled run. */
  meanKvUsage: number[];
  /** max − min of {@link meanKvUsage}. */
  kvImbalance: number;
  /** Mean program latency (finish − arrival), ms. */
  meanProgramLatencyMs: number;
  /** Time calls spent held at the gateway by pausing, summed, ms. */
  heldMs: number;
  pauses: number;
  restores: number;
  /** The gateway's program table at the end: every program released (terminated), none active. */
  gatewayPrograms: { active: number; terminated: number };
  /** Output tokens generated over all calls. */
  outputTokens: number;
  /** Each program's end time since the clock's start, ms, in program order. */
  programEndsMs: number[];
  /** Highest fraction of an engine's KV blocks in use, checked at every engine step (never above 1). */
  peakKvUsage: number;
  /** Highest KV blocks in use on any engine, checked at every step, in blocks, and the capacity in blocks. */
  peakKvBlocks: number;
  kvBlocksPerEngine: number;
  series: GatewaySimSeries;
}

/**
 * Run every program to its last turn on a fresh simulated cluster and return the metrics. Each
 * program is an agent: call, tool time, call, ..., then release, each call through `runCall` as the
 * HTTP gateway serves it. With pausing, the PauseGate pauses a program on its engine between calls
 * (the engine leaves its KV evictable) and holds its next call until it restores or admits it.
 */
export async function runGatewaySim(programs: readonly AgentProgramSpec[], o: GatewaySimOptions): Promise<GatewaySimResult> {
  if (!(Number.isInteger(o.engines) && o.engines >= 1)) throw new ArborError(`gateway sim: engines must be an integer >= 1, got ${o.engines}`, "config");
  if (programs.length === 0) throw new ArborError("gateway sim: the workload has no programs", "config");
  // Waves run one after another (a sync run's iterations): a wave's programs arrive after its start as they say.
  const waves = programWaves(programs);
  const profile = getCostProfile(o.profile ?? "llama-3-8b/h100");
  const numBlocks = Math.floor(o.kvTokensPerEngine / profile.blockSize);
  if (!(numBlocks >= 1)) throw new ArborError(`gateway sim: kvTokensPerEngine must hold at least one block, got ${o.kvTokensPerEngine}`, "config");
  const capacityTokens = numBlocks * profile.blockSize;
  const scrapeMs = o.scrapeMs ?? 1000;
  const clock = new VirtualClock();
  const rng = new Rng(o.seed);
  const ids = new Set<string>();
  for (const p of programs) {
    if (ids.has(p.programId)) throw new ArborError(`gateway sim: program id ${p.programId} is used twice`, "config");
    ids.add(p.programId);
  }

  const l2Blocks = o.l2TokensPerEngine === undefined ? 0 : Math.floor(o.l2TokensPerEngine / profile.blockSize);
  if (o.l2TokensPerEngine !== undefined && !(l2Blocks >= 1)) {
    throw new ArborError(`gateway sim: l2TokensPerEngine must hold at least one block, got ${o.l2TokensPerEngine}`, "config");
  }
  if (o.pauseTo === "L2" && l2Blocks === 0) throw new ArborError('gateway sim: pauseTo "L2" needs l2TokensPerEngine', "config");
  if (o.pauseTo === "L3") throw new ArborError('gateway sim: pauseTo "L3" is not simulated here (no shared pool); use "L2" or "drop"', "config");
  // Counted at every engine step by the executor wrapper below: what the series and the peak read.
  let sampledTokens = 0;
  let promptComputed = 0;
  let peakBlocks = 0;
  const backends: SimBackend[] = Array.from({ length: o.engines }, (_, i) => {
    const name = `engine-${i}`;
    const l2 = l2Blocks > 0 ? new InProcessKvTier({ name: "L2", capacityBlocks: l2Blocks, bandwidthBytesPerMs: profile.l2BandwidthBytesPerMs }) : undefined;
    const kv = new KvBlockManager({ blockSize: profile.blockSize, numBlocks, enablePrefixCaching: true, bytesPerToken: profile.kvBytesPerToken, ...(l2 ? { l2 } : {}) });
    const scheduler = new Scheduler(
      { maxNumBatchedTokens: 8192, maxNumSeqs: o.maxNumSeqs ?? 256, policy: "fcfs", enableChunkedPrefill: true, maxModelLen: capacityTokens, stopTokenIds: [STOP], maxWaiting: 1_000_000 },
      kv,
      clock,
    );
    const executor = new CostModelExecutor(profile, rng.fork(name), { vocabSize: VOCAB, stopTokenIds: [STOP] });
    // Counts what each step computes before the cost model runs it: a chunk that extends a request
    // past its prompt by one token is a decode; every other chunk computes prompt (or recomputed) tokens.
    const counting: StepExecutor = {
      run(plan: StepPlan) {
        for (const c of plan.chunks) {
          if (c.samples) sampledTokens++;
          const promptLen = backend.promptLength(c.requestId);
          if (!(c.numNewTokens === 1 && c.numComputedTokens >= promptLen)) promptComputed += c.numNewTokens;
        }
        peakBlocks = Math.max(peakBlocks, Math.round(kv.usage() * numBlocks));
        return executor.run(plan);
      },
    };
    // The engine reports finished requests to its backend (created next; called only later).
    const engine = new SimEngine({ scheduler, executor: counting, clock, onFinished: (f) => backend.finished(f) });
    const backend: SimBackend = new SimBackend(name, { kv, scheduler, executor, engine, capacityTokens }, o.pauseTo ?? "drop");
    return backend;
  });
  const names = backends.map((b) => b.name);

  // The production pieces, built as createGateway builds them.
  const router = createPluginRouter(names, resolveRoutingConfig(o.routing));
  const table = new ProgramTable({ clock, maxPrograms: Math.max(1024, programs.length) });
  const pausing = o.pausing === undefined || o.pausing === false ? undefined : o.pausing === true ? {} : o.pausing;
  const gateFailures: string[] = [];
  const gateReady: Promise<PauseGate> | undefined =
    pausing === undefined
      ? undefined
      : PauseGate.create({
          backends,
          clock,
          registry: new Registry(),
          config: { ...pausing, capacities: Object.fromEntries(names.map((n) => [n, capacityTokens])) },
          log: (line) => gateFailures.push(line),
        });
  const path: CallPath = { router, table, history: new Map(), gateReady: gateReady as Promise<CallGate> | undefined };

  const usageSum = new Map(names.map((n) => [n, 0]));
  const latencies: number[] = [];
  const ends = new Map<string, number>();
  const errors: unknown[] = [];
  let turns = 0;
  let outputTokens = 0;
  let heldMs = 0;
  let samples = 0;
  let live = programs.length;
  let monitor: Timer | null = null;

  const series: GatewaySimSeries = { outputTokens: [], kvUsage: Object.fromEntries(names.map((n) => [n, []])), preemptions: [], recomputedTokens: [] };
  let uniqueSubmitted = 0;
  const scrape = (): void => {
    const tMs = clock.now();
    let preemptions = 0;
    for (const b of backends) {
      const s = b.parts.scheduler.stats();
      const usage = b.parts.kv.usage();
      preemptions += s.preemptions;
      usageSum.set(b.name, (usageSum.get(b.name) as number) + usage);
      (series.kvUsage[b.name] as SeriesPoint[]).push({ tMs, value: usage });
      router.updateMetrics(b.name, { running: s.running, waiting: s.waiting, kvUsage: usage, kvCapacityTokens: capacityTokens, blockSize: profile.blockSize });
    }
    series.outputTokens.push({ tMs, value: sampledTokens });
    series.preemptions.push({ tMs, value: preemptions });
    // A call submitted but not yet prefilled counts its unique tokens early; never below zero.
    series.recomputedTokens.push({ tMs, value: Math.max(0, promptComputed - uniqueSubmitted) });
    samples++;
  };

  /** One agent program: its calls through the gateway's call path, tool time between them, then release. */
  const runProgram = async (spec: AgentProgramSpec): Promise<void> => {
    const id = spec.programId;
    const arrival = clock.now();
    let prompt = spec.promptTokenIds;
    // What a perfect cache holds for this program: its last context less the last output token.
    let cached: readonly number[] = spec === programs[0] ? [] : (programs[0] as AgentProgramSpec).promptTokenIds;
    for (const [t, turn] of spec.turns.entries()) {
      uniqueSubmitted += prompt.length - commonPrefix(prompt, cached);
      const start = clock.now();
      const output = await runCall(path, { programId: id, start, estimateTokens: () => prompt.length }, async (serving) => {
        // No virtual time passes in the call path but at the pause gate: the wait is time held.
        heldMs += clock.now() - start;
        const backend = backends.find((b) => b.name === serving.route.backend) as SimBackend;
        const r = await backend.generate({ promptTokenIds: prompt, maxTokens: turn.outputLength, temperature: 1, programId: id, stopTokenIds: [STOP] });
        if (r.finishReason !== "stop" || r.outputTokenIds.length !== turn.outputLength) {
          throw new ArborError(`gateway sim: ${id} turn ${t} ended with ${r.finishReason} after ${r.outputTokenIds.length} tokens, expected stop after ${turn.outputLength}`, "internal");
        }
        callRecorded(path, id, prompt, r.outputTokenIds);
        serving.recorded({ promptTokens: prompt, outputTokens: r.outputTokenIds });
        return r.outputTokenIds;
      });
      turns++;
      outputTokens += output.length;
      if (t === spec.turns.length - 1) break;
      cached = [...prompt, ...output.slice(0, -1)];
      // A context reset (summary) starts the next call from new tokens; otherwise the context grows.
      prompt = turn.resetPromptTokenIds ?? [...prompt, ...output, ...turn.toolTokens];
      await clock.sleep(turn.toolMs);
    }
    ends.set(id, clock.now());
    o.onProgramEnded?.(ends.size);
    latencies.push(clock.now() - arrival);
    table.release(id);
    programForgotten(path, id);
    for (const b of backends) b.endProgram(id);
  };

  const finishOne = (): void => {
    if (--live > 0) return;
    monitor?.cancel();
    void gateReady?.then((g) => g.close());
  };
  let wave = 0;
  let waveLeft = 0;
  const startWave = (): void => {
    const members = waves[wave] as AgentProgramSpec[];
    waveLeft = members.length;
    const ended = (): void => {
      finishOne();
      if (--waveLeft === 0 && ++wave < waves.length) startWave();
    };
    for (const p of members) {
      clock.setTimer(p.arrivalMs, () => {
        runProgram(p).then(ended, (e: unknown) => {
          errors.push(e);
          ended();
        });
      });
    }
  };
  if (waves.length > 0) startWave();

  scrape();
  const loop = (): void => {
    monitor = clock.setTimer(scrapeMs, () => {
      scrape();
      loop();
    });
  };
  loop();
  // The gate learns its capacities before the first arrival (its creation awaits nothing here).
  await gateReady;
  await settleUntilIdle(
    clock,
    backends.map((b) => b.parts.engine),
  );
  if (errors.length > 0) throw errors[0];
  if (latencies.length !== programs.length) {
    throw new ArborError(`gateway sim: ${programs.length - latencies.length} program(s) did not finish${gateFailures.length > 0 ? `; pause gate: ${gateFailures[0]}` : ""}`, "internal");
  }

  const makespanMs = clock.now();
  scrape(); // the last point of every series, at the end
  const meanKvUsage = names.map((n) => (usageSum.get(n) as number) / samples);
  const counters = (await gateReady)?.controller.counters();
  return {
    programs: programs.length,
    turns,
    makespanMs,
    stepsPerMin: turns / (makespanMs / 60_000),
    uniquePromptTokens: uniqueSubmitted,
    promptTokensComputed: promptComputed,
    recomputeTokens: promptComputed - uniqueSubmitted,
    preemptions: backends.reduce((s, b) => s + b.parts.scheduler.stats().preemptions, 0),
    meanKvUsage,
    kvImbalance: Math.max(...meanKvUsage) - Math.min(...meanKvUsage),
    meanProgramLatencyMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    heldMs,
    pauses: counters?.pauses ?? 0,
    restores: counters?.restores ?? 0,
    gatewayPrograms: table.counts(),
    outputTokens,
    programEndsMs: programs.map((p) => ends.get(p.programId) as number),
    peakKvUsage: peakBlocks / numBlocks,
    peakKvBlocks: peakBlocks,
    kvBlocksPerEngine: numBlocks,
    series,
  };
}

/** Programs by wave (AgentProgramSpec.wave, absent: 0), waves in ascending order, each in the given order. */
export function programWaves(programs: readonly AgentProgramSpec[]): AgentProgramSpec[][] {
  const byWave = new Map<number, AgentProgramSpec[]>();
  for (const p of programs) {
    const w = p.wave ?? 0;
    if (!Number.isInteger(w) || w < 0) throw new ArborError(`gateway sim: program ${p.programId}: wave must be an integer >= 0, got ${w}`, "config");
    let members = byWave.get(w);
    if (members === undefined) byWave.set(w, (members = []));
    members.push(p);
  }
  return [...byWave].sort((a, b) => a[0] - b[0]).map(([, members]) => members);
}
