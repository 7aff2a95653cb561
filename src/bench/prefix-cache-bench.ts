// Engine benchmark (b): the same multi-turn agent workload through the simulated engine (real
// scheduler and KV block manager, cost-model executor, virtual clock) with and without prefix
// caching: hit rate, prompt tokens recomputed, preemptions, and time.
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import { getCostProfile } from "../engine/costmodel/profile.js";
import { KvBlockManager } from "../engine/kv/block-manager.js";
import { Scheduler } from "../engine/scheduler/scheduler.js";
import { SimEngine } from "../engine/sim-engine.js";
import { generateAgentWorkload, type AgentWorkloadOptions } from "../sim/agent-workload.js";
import { agentWorkloadDriver } from "../sim/run-agent-workload.js";
import type { BenchOptions, BenchTable } from "./bench.js";

const PROFILE = "llama-3-8b/h100";
const VOCAB = 128_256; // Llama-3
const STOP = 2;

export interface PrefixCacheRun {
  hitRate: number;
  promptTokens: number;
  promptTokensComputed: number;
  preemptions: number;
  makespanMs: number;
  meanProgramLatencyMs: number;
  steps: number;
}

/** Run the workload once on a fresh simulated engine. */
export function runAgentWorkloadOnce(w: AgentWorkloadOptions, prefixCaching: boolean, kvTokens?: number): PrefixCacheRun {
  const profile = getCostProfile(PROFILE);
  const clock = new VirtualClock();
  const numBlocks = Math.floor((kvTokens ?? profile.hbmKvCapacityTokens) / profile.blockSize);
  const kv = new KvBlockManager({
    blockSize: profile.blockSize,
    numBlocks,
    enablePrefixCaching: prefixCaching,
    bytesPerToken: profile.kvBytesPerToken,
  });
  const scheduler = new Scheduler(
    { maxNumBatchedTokens: 8192, maxNumSeqs: 256, policy: "fcfs", enableChunkedPrefill: true, maxModelLen: Math.min(32_768, numBlocks * profile.blockSize), stopTokenIds: [STOP], maxWaiting: 1_000_000 },
    kv,
    clock,
  );
  const executor = new CostModelExecutor(profile, new Rng(w.seed), { vocabSize: VOCAB, stopTokenIds: [STOP] });
  const programs = generateAgentWorkload(w);
  const driver = agentWorkloadDriver(programs, executor, clock);
  const engine = new SimEngine({ scheduler, executor, clock, onFinished: (f) => driver.onFinished(f) });
  const r = driver.run(engine);
  const stats = kv.stats();
  const decodeTokens = r.outputTokens - r.requests; // the last output token of a request is never fed back
  const latencies = [...r.programLatencyMs.values()];
  return {
    hitRate: stats.queries === 0 ? 0 : stats.hits / stats.queries,
    promptTokens: r.promptTokens,
    promptTokensComputed: engine.usage.computedTokens - decodeTokens,
    preemptions: r.preemptions,
    makespanMs: r.makespanMs,
    meanProgramLatencyMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    steps: engine.usage.steps,
  };
}

/** The workload of the benchmark (SWE-agent-like contexts; quick = a small version). */
export function agentWorkloadOptions(quick: boolean): AgentWorkloadOptions {
  return {
    programs: quick ? 12 : 96,
    turns: quick ? 4 : 10,
    systemPromptTokens: 2000,
    taskTokens: 600,
    outputTokens: [100, 600],
    toolOutputTokens: [200, 1500],
    toolMs: [500, 5000],
    arrivalWindowMs: 2000,
    vocabSize: VOCAB,
    minTokenId: 3,
    seed: 17,
  };
}

/** Table (b): with vs without prefix caching. */
export function prefixCacheTable(opts: BenchOptions): BenchTable {
  const w = agentWorkloadOptions(opts.quick);
  opts.log(`prefix cache: ${w.programs} programs × ${w.turns} turns, ${PROFILE} cost model, without caching`);
  const off = runAgentWorkloadOnce(w, false);
  opts.log("prefix cache: with caching");
  const on = runAgentWorkloadOnce(w, true);
  const row = (name: string, a: number, b: number): (string | number)[] => [name, a, b, a === 0 ? "—" : b / a];
  return {
    title: "(b) prefix caching on a multi-turn agent workload (simulated engine, virtual clock)",
    columns: ["metric", "without", "with", "with / without"],
    rows: [
      row("prefix-cache hit rate", off.hitRate, on.hitRate),
      row("prompt tokens submitted", off.promptTokens, on.promptTokens),
      row("prompt tokens computed (incl. recompute)", off.promptTokensComputed, on.promptTokensComputed),
      row("preemptions", off.preemptions, on.preemptions),
      row("engine steps", off.steps, on.steps),
      row("makespan (s)", off.makespanMs / 1000, on.makespanMs / 1000),
      row("mean program latency (s)", off.meanProgramLatencyMs / 1000, on.meanProgramLatencyMs / 1000),
    ],
    notes: [
      `${w.programs} programs, ${w.turns} turns, shared system prompt ${w.systemPromptTokens} tokens, task ${w.taskTokens}, outputs ${w.outputTokens.join("–")}, tool outputs ${w.toolOutputTokens.join("–")} tokens, tools ${w.toolMs.join("–")} ms`,
      "scheduler: vLLM v1 policy, 8192-token budget, 256 sequences, chunked prefill; KV = the profile's HBM capacity",
    ],
  };
}
