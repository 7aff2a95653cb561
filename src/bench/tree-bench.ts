// `arbor bench tree`: prefix-tree merging (docs/references.md §C1) against flat packing on the reference trainer,
// in one run — tokens run through the model and the time of one trainer step (forward, backward, Adam),
// on a synthetic SWE-agent-like batch at AReaL-DTA's shape (groups of 16, 20–50 calls per trajectory, growing
// contexts; synthetic.ts states the assumptions) and on the batch of a real Arbor run read from its SQLite
// store (the quickstart is run first when no run is on disk). Each batch goes through the real batch builder
// (GRPO) in both sample modes: per-call samples, and merged programs. Printed beside the issue's targets:
// tokens flat / tree ≥ 8× (AReaL-DTA reports 8.31×) on the per-call SWE batch, and step time flat / tree ≥ 0.8 ×
// the token ratio on every batch. The loss column shows both layouts computing the same loss.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { syntheticSweBatch, type SyntheticOptions } from "../batch/tree/synthetic.js";
import type { TreeBatch } from "../batch/tree/tree-batch.js";
import type { SampleMode } from "../batch/trajectory-samples.js";
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import type { Group, Trajectory } from "../core/types.js";
import { tinyConfig, type TinyLlamaConfig } from "../model/config.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import type { Layout } from "../trainer/layouts.js";
import type { Trainer } from "../trainer/trainer.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";
import { isHeldOutGroup } from "../store/held-out-groups.js";

export interface TreeBenchConfig {
  quick: boolean;
  /** Timed steps per layout (median reported), after `warmup` untimed ones: at least this many... */
  steps: number;
  /** ...and more, up to `maxSteps`, until the timed steps took this much CPU time (small batches are noisiest). */
  minTimedCpuMs: number;
  maxSteps: number;
  warmup: number;
  model: Omit<TinyLlamaConfig, "nVocab" | "rmsEps" | "ropeFreqBase">;
  /** The SWE-agent-like batch (token counts already divided by `tokenScale`). */
  synthetic: SyntheticOptions;
  /** Full-size token counts are divided by this to fit the reference trainer (the shape is kept). */
  tokenScale: number;
  modes: SampleMode[];
  /** A run store to read; absent = the newest `<runsDir>/*\/store.sqlite`, else run `quickstart` first. */
  storePath?: string;
  runsDir: string;
  quickstartConfig: string;
  /** Most programs taken from the real run (its first groups), to bound the step time. */
  maxRunPrograms: number;
}

/** Target of the issue: flat tokens / tree tokens on the SWE-agent-shaped per-call batch (AReaL-DTA: 8.31×). */
export const TOKEN_RATIO_TARGET = 8;
/** Target of the issue: step time flat / tree ≥ this × the token ratio. */
export const TIME_FOLLOWS_TOKENS_TARGET = 0.8;

/**
 * Full-size SWE-agent turn lengths (tokens) the synthetic batch is scaled from: a system prompt with the tool
 * documentation (~2,000), the issue text (200–1,500), per call a thought and an action (50–400) and a tool
 * result, truncated as SWE-agent does (50–1,500). 20–50 calls give contexts of ~10k–60k tokens.
 */
const SWE_FULL = { systemTokens: 2000, taskTokens: [200, 1500], outputTokens: [50, 400], toolTokens: [50, 1500] } as const;

/** The SWE-agent workload at AReaL-DTA's shape (groups of 16, 20–50 calls), token counts divided by `scale`. */
export function sweShape(seed: number, scale: number, vocab: number, turns: [number, number] = [20, 50], groupSize = 16): SyntheticOptions {
  const s = (x: number): number => Math.max(1, Math.round(x / scale));
  const r = ([lo, hi]: readonly [number, number]): [number, number] => [s(lo), s(hi)];
  return {
    seed,
    tasks: 1,
    groupSize,
    turns,
    systemTokens: s(SWE_FULL.systemTokens),
    taskTokens: r(SWE_FULL.taskTokens),
    outputTokens: r(SWE_FULL.outputTokens),
    toolTokens: r(SWE_FULL.toolTokens),
    // Common opening moves (list the repo, open the file the issue names): a sibling repeats the group's
    // action with probability 0.5 per turn until it departs, so about half share their first action.
    coincideProbability: 0.5,
    vocab,
  };
}

/** The benchmark's workload; `quick` is small enough for tests and smoke runs. */
export function treeBenchConfig(quick: boolean): TreeBenchConfig {
  const vocab = new Vocab().size;
  const tokenScale = quick ? 400 : 128;
  return {
    quick,
    // One step's time is noisy on a shared machine: the median of several.
    steps: quick ? 1 : 3,
    minTimedCpuMs: quick ? 0 : 5000,
    maxSteps: quick ? 1 : 15,
    warmup: quick ? 0 : 1,
    model: quick
      ? { nEmbd: 32, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 4096 }
      : { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 4096 },
    synthetic: quick ? sweShape(1, tokenScale, vocab, [3, 4], 4) : sweShape(1, tokenScale, vocab),
    tokenScale,
    modes: ["per-call", "merged"],
    runsDir: ".arbor/runs",
    quickstartConfig: "examples/quickstart.yaml",
    maxRunPrograms: quick ? 8 : 32,
  };
}

/** One measured (batch, layout). */
export interface LayoutRun {
  source: string;
  samples: number;
  layout: Layout;
  tokens: number;
  /** Wall time of one step (median). */
  stepMs: number;
  /** CPU time of the process in that step (median): the work done, whatever else runs on the machine. */
  cpuMs: number;
  loss: number;
  /** Whether the ≥ 8× token target applies to this source (the SWE-agent-shaped per-call batch). */
  tokenTarget?: boolean;
}

/** The table: per source, the flat row then the tree row, ratios = flat / row, each beside its target. */
export function treeTable(runs: readonly LayoutRun[], notes: string[] = []): BenchTable {
  const flatOf = new Map(runs.filter((r) => r.layout === "flat").map((r) => [r.source, r]));
  const mark = (ok: boolean): string => (ok ? "met" : "MISSED");
  return {
    title: "prefix-tree merging vs flat packing (reference trainer step: forward + backward + Adam)",
    columns: ["source", "samples", "layout", "tokens", "step (ms)", "cpu (ms)", "loss", "tokens ×", "target tokens ×", "time ×", "target time ×", "time ÷ tokens"],
    rows: runs.map((r) => {
      const flat = flatOf.get(r.source);
      const tokensX = flat ? flat.tokens / r.tokens : 1;
      const timeX = flat ? flat.cpuMs / r.cpuMs : 1;
      const isTree = r.layout !== "flat" && flat !== undefined;
      const timeTarget = TIME_FOLLOWS_TOKENS_TARGET * tokensX;
      return [
        r.source,
        r.samples,
        r.layout,
        r.tokens,
        r.stepMs,
        r.cpuMs,
        r.loss,
        tokensX,
        isTree && r.tokenTarget ? `≥ ${TOKEN_RATIO_TARGET} ${mark(tokensX >= TOKEN_RATIO_TARGET)}` : "",
        timeX,
        isTree ? `≥ ${timeTarget.toFixed(2)} ${mark(timeX >= timeTarget)}` : "",
        isTree ? `${(timeX / tokensX).toFixed(2)} (≥ ${TIME_FOLLOWS_TOKENS_TARGET})` : "",
      ];
    }),
    notes: [
      "tokens = tokens run through the model (flat: Σ sample lengths; tree: trie nodes); × = flat / row",
      `time ÷ tokens = time × / tokens ×: how far step time follows the tokens saved (target ≥ ${TIME_FOLLOWS_TOKENS_TARGET})`,
      `targets (issue 18): tokens × ≥ ${TOKEN_RATIO_TARGET} on the SWE-agent-shaped per-call batch (AReaL-DTA reports 8.31×); time × ≥ ${TIME_FOLLOWS_TOKENS_TARGET} × tokens ×`,
      "time × = flat / tree CPU time of the step (the process's user + system time): other processes on the machine stretch wall time, not the work",
      "tree attention is one op over the maximal chains, each over its ancestors (short chains merged into blocks where that costs less than per-op overhead): attention work shrinks by Σ (call length)² / (trajectory length)², less than tokens; linear layers shrink with tokens",
      "so time × falls as contexts grow against nEmbd (attention's share rises); at small scales the flat side's per-call overhead (one pass and one L×L mask per call) weighs more than at full size",
      ...notes,
    ],
  };
}

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
}

/** Time `steps` (more while under `minTimedCpuMs`, at most `maxSteps`) trainer steps of `batch`, starting from the initial weights (so every layout sees the same numbers). */
function measure(cfg: TreeBenchConfig, tr: Trainer, initial: ReturnType<typeof initWeights>, batch: TreeBatch): { ms: number; cpuMs: number; loss: number; tokens: number } {
  tr.model.assign(initial);
  for (let i = 0; i < cfg.warmup; i++) tr.step(batch);
  const times: number[] = [];
  const cpu: number[] = [];
  let loss = Number.NaN;
  let tokens = 0;
  let spent = 0;
  for (let i = 0; i < cfg.maxSteps && (i < cfg.steps || spent < cfg.minTimedCpuMs); i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const r = tr.step(batch);
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    spent += (c.user + c.system) / 1000;
    if (i === 0) loss = r.loss;
    tokens = r.tokens;
  }
  return { ms: median(times), cpuMs: median(cpu), loss, tokens };
}

/** The newest `store.sqlite` under `runsDir`, if any. */
export function findRunStore(runsDir: string): string | undefined {
  if (!existsSync(runsDir)) return undefined;
  const stores = readdirSync(runsDir)
    .map((d) => join(runsDir, d, "store.sqlite"))
    .filter((p) => existsSync(p))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  return stores[0];
}

/** Trajectories and groups of the newest run in `storePath` with rewarded programs, capped at `maxPrograms`. */
export async function readRunBatch(storePath: string, maxPrograms: number): Promise<{ runId: string; trajectories: Trajectory[]; groups: Group[] }> {
  const store = new SqliteTrajectoryStore(storePath);
  try {
    for (const run of (await store.listRuns()).reverse()) {
      const trajectories = await store.listTrajectories(run.id);
      const rewarded = new Map(trajectories.filter((t) => t.reward !== undefined && t.calls.length > 0).map((t) => [t.program.id, t]));
      const groups: Group[] = [];
      let programs = 0;
      for (const g of await store.listGroups(run.id)) {
        // Held-out evaluation groups are never trained on: only the rollout's groups make a training batch.
        if (isHeldOutGroup(g) || g.programIds.length === 0 || !g.programIds.every((p) => rewarded.has(p))) continue;
        if (programs + g.programIds.length > maxPrograms && groups.length > 0) break;
        groups.push(g);
        programs += g.programIds.length;
      }
      if (groups.length > 0) {
        const keep = new Set(groups.flatMap((g) => g.programIds));
        return { runId: run.id, groups, trajectories: [...rewarded.values()].filter((t) => keep.has(t.program.id)) };
      }
    }
  } finally {
    await store.close();
  }
  throw new ArborError(`tree bench: no run in ${storePath} has a fully rewarded group`, "bench");
}

async function realRunStore(cfg: TreeBenchConfig, log: (line: string) => void, runConfig: BenchOptions["runConfig"]): Promise<string> {
  if (cfg.storePath) return cfg.storePath;
  const found = findRunStore(cfg.runsDir);
  if (found) return found;
  if (!runConfig) throw new ArborError(`tree bench: no run store under ${cfg.runsDir}; run \`arbor run ${cfg.quickstartConfig}\` first`, "bench");
  log(`no run store under ${cfg.runsDir}: running ${cfg.quickstartConfig} first`);
  return runConfig(cfg.quickstartConfig, log);
}

/** Run the benchmark. */
export async function runTreeBench(cfg: TreeBenchConfig, log: (line: string) => void, runConfig?: BenchOptions["runConfig"]): Promise<BenchTable[]> {
  const sources: { name: string; trajectories: readonly Trajectory[]; groups: readonly Group[]; swe?: true }[] = [];
  const syn = syntheticSweBatch(cfg.synthetic);
  const [lo, hi] = cfg.synthetic.turns ?? [0, 0];
  sources.push({ name: `SWE-agent G=${cfg.synthetic.groupSize ?? 8} ${lo}-${hi} calls`, ...syn, swe: true });
  const storePath = await realRunStore(cfg, log, runConfig);
  const run = await readRunBatch(storePath, cfg.maxRunPrograms);
  sources.push({ name: `run ${run.runId}`, trajectories: run.trajectories, groups: run.groups });

  const batches = sources.flatMap((s) =>
    cfg.modes.map((mode) => ({ source: `${s.name} (${mode})`, tokenTarget: s.swe === true && mode === "per-call", tree: buildTrainingBatch({ id: s.name, trajectories: s.trajectories, groups: s.groups, estimator: "grpo", mode }).tree })),
  );
  let maxToken = 0;
  for (const b of batches) for (const t of b.tree.tree.tokens) maxToken = Math.max(maxToken, t);
  const config = tinyConfig({ ...cfg.model, nVocab: Math.max(new Vocab().size, maxToken + 1) });

  // tfjs loads on demand: importing it costs every `arbor` command ~1-2 s otherwise.
  const { Trainer } = await import("../trainer/trainer.js");
  const initial = initWeights(config, new Rng(1));
  const trainers = new Map<Layout, Trainer>();
  const runs: LayoutRun[] = [];
  try {
    for (const layout of ["flat", "tree"] as const) trainers.set(layout, await Trainer.create(config, initial, { layout }));
    for (const b of batches) {
      if (b.tree.tree.terms.node.length === 0) {
        log(`${b.source}: no trainable tokens, skipped`);
        continue;
      }
      for (const layout of ["flat", "tree"] as const) {
        const m = measure(cfg, trainers.get(layout) as Trainer, initial, b.tree);
        runs.push({ source: b.source, samples: b.tree.stats.samples, layout, tokens: m.tokens, stepMs: m.ms, cpuMs: m.cpuMs, loss: m.loss, tokenTarget: b.tokenTarget });
        log(`${b.source} ${layout}: ${m.tokens} tokens, ${m.ms.toFixed(0)} ms/step (${m.cpuMs.toFixed(0)} ms CPU)`);
      }
    }
  } finally {
    for (const tr of trainers.values()) tr.dispose();
  }
  const c = cfg.synthetic;
  return [
    treeTable(runs, [
      `step and cpu = median of ${cfg.steps}-${cfg.maxSteps} timed steps per layout (more until they took ${cfg.minTimedCpuMs} ms CPU) after ${cfg.warmup} untimed`,
      `SWE-agent batch: ${c.groupSize} programs of ${lo}-${hi} calls; full-size turn lengths (system ${SWE_FULL.systemTokens}, task ${SWE_FULL.taskTokens.join("-")}, output ${SWE_FULL.outputTokens.join("-")}, tool ${SWE_FULL.toolTokens.join("-")} tokens) divided by ${cfg.tokenScale}; siblings repeat the group's action with probability ${c.coincideProbability} per turn; whole history kept (no observation elision)`,
      `model: nEmbd ${config.nEmbd}, ${config.nLayer} layers, ${config.nHead} heads, reference trainer on tfjs-wasm (CPU); real run from ${storePath}`,
    ]),
  ];
}

export const treeBench: Benchmark = {
  name: "tree",
  description: "prefix-tree merging vs flat packing: tokens and reference-trainer step time (synthetic SWE batch and a real run)",
  run: (o) => runTreeBench(treeBenchConfig(o.quick), o.log, o.runConfig),
};
