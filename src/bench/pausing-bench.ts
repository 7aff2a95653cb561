// `arbor bench pausing` (issue 4 item 10): a ThunderAgent-like agent workload on a simulated cluster
// of cost-model engines under the virtual clock, for each router with and without pausing:
// throughput (steps/min), recompute tokens, KV imbalance, ratios against least-load without pausing.
// Two tables: KV oversubscribed (where pausing should matter) and KV ample (where it should not).
import { runGatewaySim, type GatewaySimResult } from "../sim/gateway-sim.js";
import { generateThunderWorkload, maxThunderContextTokens, type ThunderWorkloadOptions } from "../sim/thunder-workload.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";

/** The routers compared, in table order (the first is the baseline). */
export const PAUSING_BENCH_ROUTERS = ["least-load", "sticky-program", "prefix-affinity", "cost-aware"] as const;

export interface PausingScenario {
  title: string;
  workload: ThunderWorkloadOptions;
  engines: number;
  kvTokensPerEngine: number;
}

/** The workload: many programs, heavy-tailed tools, growing contexts (quick = a small version). */
export function thunderWorkloadOptions(quick: boolean): ThunderWorkloadOptions {
  return {
    programs: quick ? 24 : 48,
    turns: quick ? [3, 6] : [4, 8],
    systemPromptTokens: quick ? 1000 : 2000,
    taskTokens: quick ? 400 : 600,
    outputTokens: quick ? [50, 200] : [80, 300],
    toolOutputTokens: quick ? [300, 1500] : [300, 2000],
    toolMedianMs: 1000,
    toolSigma: 1.2,
    toolMaxMs: 60_000,
    arrivalWindowMs: 1000,
    vocabSize: 128_256,
    minTokenId: 3,
    seed: 23,
  };
}

/** The two scenarios: same programs, KV oversubscribed versus ample. */
export function pausingScenarios(quick: boolean): PausingScenario[] {
  const workload = thunderWorkloadOptions(quick);
  const engines = quick ? 2 : 4;
  const maxCtx = maxThunderContextTokens(workload);
  // Oversubscribed: every engine holds 1.5 of the largest contexts, while
  // programs/engines of them compete for it. Ample: every program's largest context fits at once.
  const tight = Math.ceil((maxCtx * 1.5) / 1024) * 1024;
  const ample = Math.ceil((maxCtx * workload.programs) / 1024) * 1024;
  return [
    { title: "KV oversubscribed", workload, engines, kvTokensPerEngine: tight },
    { title: "KV ample (light)", workload, engines, kvTokensPerEngine: ample },
  ];
}

export interface PausingRow {
  routing: string;
  pausing: boolean;
  result: GatewaySimResult;
}

/** Run one scenario for every router, pausing off then on. */
export async function runPausingScenario(s: PausingScenario, log: (line: string) => void = () => {}): Promise<PausingRow[]> {
  const programs = generateThunderWorkload(s.workload);
  const rows: PausingRow[] = [];
  for (const routing of PAUSING_BENCH_ROUTERS) {
    for (const pausing of [false, true]) {
      log(`pausing: ${s.title}: ${routing}, pausing ${pausing ? "on" : "off"}`);
      const result = await runGatewaySim(programs, { engines: s.engines, kvTokensPerEngine: s.kvTokensPerEngine, routing, pausing, seed: s.workload.seed });
      rows.push({ routing, pausing, result });
    }
  }
  return rows;
}

const ratio = (a: number, b: number): number | string => (b === 0 ? (a === 0 ? 1 : "—") : a / b);

/** Format one scenario's rows as a table with ratios against the first row (least-load, no pausing). */
export function pausingTable(s: PausingScenario, rows: readonly PausingRow[]): BenchTable {
  const base = (rows[0] as PausingRow).result;
  const w = s.workload;
  return {
    title: `pausing × routing, ${s.title}: ${s.engines} engines × ${s.kvTokensPerEngine} KV tokens (simulated, virtual clock)`,
    columns: [
      "router",
      "pausing",
      "steps/min",
      "makespan (s)",
      "recompute tok",
      "preemptions",
      "KV imbalance",
      "pauses",
      "held (s)",
      "steps/min ×",
      "recompute ×",
      "imbalance ×",
      "pausing ×",
    ],
    rows: rows.map(({ routing, pausing, result: r }) => {
      const off = rows.find((x) => x.routing === routing && !x.pausing)?.result;
      return [
      routing,
      pausing ? "on" : "off",
      r.stepsPerMin,
      r.makespanMs / 1000,
      r.recomputeTokens,
      r.preemptions,
      r.kvImbalance,
      r.pauses,
      r.heldMs / 1000,
      ratio(r.stepsPerMin, base.stepsPerMin),
      ratio(r.recomputeTokens, base.recomputeTokens),
      ratio(r.kvImbalance, base.kvImbalance),
      pausing && off !== undefined ? ratio(r.stepsPerMin, off.stepsPerMin) : "—",
    ];
    }),
    notes: [
      `${w.programs} programs, ${w.turns.join("–")} turns, system prompt ${w.systemPromptTokens} + task ${w.taskTokens} tokens, outputs ${w.outputTokens.join("–")}, tool outputs ${w.toolOutputTokens.join("–")} tokens, tool latency lognormal (median ${w.toolMedianMs} ms, σ ${w.toolSigma}, cap ${w.toolMaxMs} ms); largest context ${maxThunderContextTokens(w)} tokens`,
      "engines: llama-3-8b/h100 cost model, vLLM v1 scheduler (8192-token budget, chunked prefill, prefix caching); pausing: ThunderAgent defaults (Δt 5 s, λ 1.0, C = engine KV)",
      "steps = agent turns; recompute = prompt tokens computed − tokens a single perfect cache would compute; KV imbalance = max − min of the engines' mean KV usage (sampled each second); × = ratio to least-load without pausing; pausing × = steps/min with / without pausing, same router",
      "calls go through the gateway's own call path (program table, PauseGate, router: src/gateway/call-path.ts); with pausing on, the gate places every call — a new program on the backend with the least projected KV, an active one on its bound backend, a restored one where the restore put it — and the router only confirms it, so the routers' rows coincide",
    ],
  };
}

/** The pausing benchmark. */
export const pausingBench: Benchmark = {
  name: "pausing",
  description: "ThunderAgent pausing × routing on a simulated multi-engine agent workload: steps/min, recompute, KV imbalance",
  async run(opts: BenchOptions) {
    const tables = [];
    for (const s of pausingScenarios(opts.quick)) tables.push(pausingTable(s, await runPausingScenario(s, opts.log)));
    return tables;
  },
};
