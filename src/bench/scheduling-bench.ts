// `arbor bench scheduling` (issue 6 item 6): a Seer-like rollout workload (groups of G = 8,
// heavy-tailed output lengths with Moonlight's mean/max ratio from Seer Table 3, scaled down) on a
// simulated cluster of cost-model engines under the virtual clock.
// Table 1: one synchronous iteration under fifo-group, seer and oracle-lfs: iteration time,
// throughput, tail time (last 10% of requests), preemptions; ratios against fifo-group and seer's
// share of the oracle. Table 2: asynchronous rollout (seer, Forge windowed FIFO, AReaL η) for window
// sizes 0.1N–1.0N beside synchronous RL: throughput and mean staleness.
import { ArborError } from "../core/errors.js";
import { runRolloutSim, type RolloutSimOptions, type RolloutSimResult } from "../sim/rollout-sim.js";
import { generateSeerWorkload, SEER_TABLE3, type SeerTask, type SeerWorkloadOptions } from "../sim/seer-workload.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";

/** Policies compared, in table order (the first is the baseline). */
export const SCHEDULING_BENCH_POLICIES = ["fifo-group", "seer", "oracle-lfs"] as const;
/** Async windows as fractions of N. */
export const SCHEDULING_BENCH_WINDOWS = [0.1, 0.25, 0.5, 0.75, 1.0] as const;

const MOONLIGHT = SEER_TABLE3.moonlight;

export interface SchedulingBenchConfig {
  workload: Omit<SeerWorkloadOptions, "groups">;
  /** Groups in the synchronous iteration of table 1. */
  groups: number;
  engines: number;
  kvTokensPerEngine: number;
  maxNumSeqs: number;
  chunkTokens: number;
  async: {
    policy: string;
    batchGroups: number;
    /** N: unconsumed groups at most. */
    maxInFlightGroups: number;
    maxStaleness: number;
    trainStepMs: number;
    weightSyncMs: number;
    batches: number;
  };
}

/** The benchmark's settings (quick = smaller, for tests and smoke runs). */
export function schedulingBenchConfig(quick: boolean): SchedulingBenchConfig {
  const maxTokens = quick ? 1024 : 2048;
  return {
    workload: {
      groupSize: MOONLIGHT.groupSize,
      maxTokens,
      meanRatio: MOONLIGHT.meanTokens / MOONLIGHT.maxTokens,
      promptTokens: [64, 256],
      groupSigma: 0.8,
      sampleSigma: 0.5,
      vocabSize: 128_256,
      minTokenId: 3,
      seed: 5,
    },
    groups: 64,
    engines: 4,
    // 16 max-length requests per engine: the cluster holds a fraction of an iteration at once.
    kvTokensPerEngine: maxTokens * 16,
    maxNumSeqs: 64,
    chunkTokens: 512,
    async: {
      policy: "seer",
      batchGroups: quick ? 4 : 8,
      maxInFlightGroups: quick ? 16 : 32,
      maxStaleness: 4,
      trainStepMs: quick ? 2500 : 5000,
      weightSyncMs: 500,
      batches: quick ? 6 : 10,
    },
  };
}

export interface PolicyRow {
  policy: string;
  result: RolloutSimResult;
}

const simBase = (cfg: SchedulingBenchConfig, tasks: readonly SeerTask[]): Omit<RolloutSimOptions, "policy" | "mode" | "batchGroups"> => ({
  tasks,
  groupSize: cfg.workload.groupSize,
  chunkTokens: cfg.chunkTokens,
  engines: cfg.engines,
  kvTokensPerEngine: cfg.kvTokensPerEngine,
  maxNumSeqs: cfg.maxNumSeqs,
  trainStepMs: cfg.async.trainStepMs,
  weightSyncMs: cfg.async.weightSyncMs,
  seed: cfg.workload.seed,
});

/** One synchronous iteration of all groups under each policy. */
export function runPolicyComparison(cfg: SchedulingBenchConfig, log: (line: string) => void = () => {}): PolicyRow[] {
  const tasks = generateSeerWorkload({ ...cfg.workload, groups: cfg.groups });
  return SCHEDULING_BENCH_POLICIES.map((policy) => {
    log(`scheduling: ${policy}, one iteration of ${cfg.groups} groups`);
    return { policy, result: runRolloutSim({ ...simBase(cfg, tasks), policy, mode: "sync", batchGroups: cfg.groups, maxBatches: 1 }) };
  });
}

const ratio = (a: number, b: number): number | string => (b === 0 ? "—" : a / b);

/** Table 1: the policies side by side, ratios against fifo-group. */
export function policyTable(cfg: SchedulingBenchConfig, rows: readonly PolicyRow[]): BenchTable {
  const it = (r: PolicyRow) => r.result.batches[0]?.rolloutMs ?? 0;
  const tail = (r: PolicyRow) => r.result.batches[0]?.tailMs ?? 0;
  const base = rows.find((r) => r.policy === "fifo-group");
  const oracle = rows.find((r) => r.policy === "oracle-lfs");
  if (base === undefined || oracle === undefined) throw new ArborError("scheduling bench: needs the fifo-group and oracle-lfs rows", "internal");
  const w = cfg.workload;
  const lengths = generateSeerWorkload({ ...w, groups: cfg.groups }).flatMap((t) => t.oracleLengths);
  const mean = lengths.reduce((a, b) => a + b, 0) / lengths.length;
  return {
    title: `rollout scheduling, one synchronous iteration: ${cfg.groups} groups × ${w.groupSize} on ${cfg.engines} engines × ${cfg.kvTokensPerEngine} KV tokens (simulated, virtual clock)`,
    columns: ["policy", "iteration (s)", "tokens/s", "tail (s)", "tail share", "preemptions", "recompute tok", "engine busy", "speedup ×", "tail ×", "of oracle"],
    rows: rows.map((r) => [
      r.policy,
      it(r) / 1000,
      r.result.outputTokens / (it(r) / 1000),
      tail(r) / 1000,
      tail(r) / it(r),
      r.result.preemptions,
      r.result.continuationPrefillTokens,
      r.result.engineBusy,
      ratio(it(base), it(r)),
      ratio(tail(base), tail(r)),
      ratio(it(oracle), it(r)),
    ]),
    notes: [
      `output lengths: log-normal per group (σ ${w.groupSigma}) and per sample (σ ${w.sampleSigma}), capped at ${w.maxTokens}; mean ${mean.toFixed(0)} = ${(mean / w.maxTokens).toFixed(3)} of max (Seer Table 3 Moonlight: ${MOONLIGHT.meanTokens} / ${MOONLIGHT.maxTokens} = ${(MOONLIGHT.meanTokens / MOONLIGHT.maxTokens).toFixed(3)}), ${lengths.filter((l) => l === w.maxTokens).length} of ${lengths.length} requests hit the max`,
      `engines: llama-3-8b/h100 cost model, vLLM v1 scheduler (8192-token budget, ${cfg.maxNumSeqs} seqs, chunked prefill, prefix caching), one shared L3 KV pool (Mooncake-style); seer and oracle-lfs divide requests into ${cfg.chunkTokens}-token chunks`,
      "iteration = first placement to last finish; tail = the last 10% of requests to finish; recompute = context tokens computed again when a chunk continues; speedup × and tail × = fifo-group / policy; of oracle = oracle-lfs iteration / policy iteration",
      "Seer (arXiv 2511.14617) reports Moonlight 3910 s → 2181 s per iteration, tail 1817 s → 278 s, and context-aware scheduling at 96% of an oracle longest-first scheduler",
    ],
  };
}

export interface AsyncRow {
  mode: "sync" | "async";
  /** Window W in groups (async). */
  window?: number;
  result: RolloutSimResult;
}

/** Synchronous RL, then asynchronous for each window size, same workload and trainer. */
export function runAsyncWindows(cfg: SchedulingBenchConfig, log: (line: string) => void = () => {}): AsyncRow[] {
  const a = cfg.async;
  const tasks = generateSeerWorkload({ ...cfg.workload, groups: a.batches * a.batchGroups + a.maxInFlightGroups, seed: cfg.workload.seed + 1 });
  const common = { ...simBase(cfg, tasks), policy: a.policy, batchGroups: a.batchGroups, maxBatches: a.batches };
  log(`scheduling: sync RL, ${a.batches} steps`);
  const rows: AsyncRow[] = [{ mode: "sync", result: runRolloutSim({ ...common, mode: "sync" }) }];
  for (const f of SCHEDULING_BENCH_WINDOWS) {
    const window = Math.max(1, Math.round(f * a.maxInFlightGroups));
    log(`scheduling: async RL, W = ${window} groups`);
    rows.push({ mode: "async", window, result: runRolloutSim({ ...common, mode: "async", maxInFlightGroups: a.maxInFlightGroups, window, maxStaleness: a.maxStaleness }) });
  }
  return rows;
}

/** Token-weighted mean staleness over a run's batches. */
export function meanStaleness(r: RolloutSimResult): number {
  return r.outputTokens === 0 ? 0 : r.batches.reduce((s, b) => s + b.batch.meanStaleness * b.batch.tokens, 0) / r.outputTokens;
}

/** Table 2: async windows beside sync. */
export function asyncTable(cfg: SchedulingBenchConfig, rows: readonly AsyncRow[]): BenchTable {
  const a = cfg.async;
  const sync = rows[0] as AsyncRow;
  const tput = (r: AsyncRow) => r.result.outputTokens / (r.result.makespanMs / 1000);
  return {
    title: `async rollout (${a.policy}): ${a.batches} training steps of ${a.batchGroups} groups, N = ${a.maxInFlightGroups} groups, η = ${a.maxStaleness} (simulated, virtual clock)`,
    columns: ["mode", "W (groups)", "W / N", "time (s)", "tokens/s", "mean staleness", "max staleness", "interrupted", "throughput ×"],
    rows: rows.map((r) => [
      r.mode,
      r.window ?? "—",
      r.window === undefined ? "—" : r.window / a.maxInFlightGroups,
      r.result.makespanMs / 1000,
      tput(r),
      meanStaleness(r.result),
      Math.max(0, ...r.result.batches.map((b) => b.batch.maxStaleness)),
      r.result.interrupted,
      ratio(tput(r), tput(sync)),
    ]),
    notes: [
      `trainer: ${a.trainStepMs / 1000} s per step, weight sync ${a.weightSyncMs / 1000} s on every engine; async interrupts chunks in flight at each sync and continues them on the new weights (partial rollout)`,
      "W: Forge windowed FIFO — the trainer takes any completed group among the W oldest unconsumed, so stragglers inside the window are waited for; staleness = trainer version − version of each token, token-weighted",
      `max staleness ≤ η + ⌊(W − 2)/B⌋ + 1: η (AReaL) bounds how far admission runs ahead of the trainer, and the window lets a straggler be taken up to (W − 1)/B steps late`,
      "throughput × = tokens/s / synchronous RL's; time = until the last batch is taken",
    ],
  };
}

/** The scheduling benchmark. */
export const schedulingBench: Benchmark = {
  name: "scheduling",
  description: "Seer-like rollout: fifo-group vs seer vs oracle-lfs (iteration, tail, preemptions), and async windows 0.1N–1.0N (throughput, staleness)",
  async run(opts: BenchOptions) {
    const cfg = schedulingBenchConfig(opts.quick);
    return [policyTable(cfg, runPolicyComparison(cfg, opts.log)), asyncTable(cfg, runAsyncWindows(cfg, opts.log))];
  },
};
