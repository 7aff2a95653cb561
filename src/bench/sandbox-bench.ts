// `arbor bench sandbox` (issue 5, ThunderAgent §B2): program start latency — from "start program"
// to "sandbox ready with the environment's set-up done" — for N programs arriving at a fixed rate,
// on real bwrap sandboxes, without and with the warm pool (asynchronous preparation), side by side.
// The set-up is realistic: copy a task repository into the workspace and run a short command.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { realClock } from "../core/real-clock.js";
import { createBwrapProvider } from "../sandbox/bwrap.js";
import { createSandboxPool } from "../sandbox/pool.js";
import type { Sandbox, SandboxProvider } from "../sandbox/sandbox.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";

export interface SandboxBenchOptions {
  programs: number;
  /** A new program starts every `intervalMs`. */
  intervalMs: number;
  /** Warm-pool size for the pooled run. */
  warmSize: number;
  /** Files in the task repository copied in at set-up, and bytes per file. */
  repoFiles: number;
  fileBytes: number;
  /** How long a program keeps its sandbox busy after starting (one exec of this length). */
  workMs: number;
}

/** The workload (quick = a small version for tests and smoke runs). */
export function sandboxBenchOptions(quick: boolean): SandboxBenchOptions {
  return quick
    ? { programs: 6, intervalMs: 250, warmSize: 3, repoFiles: 20, fileBytes: 1024, workMs: 100 }
    : { programs: 32, intervalMs: 200, warmSize: 6, repoFiles: 60, fileBytes: 2048, workMs: 500 };
}

/** A deterministic task repository: nested source files with distinct contents. */
export function taskRepo(o: SandboxBenchOptions): Map<string, string> {
  const files = new Map<string, string>();
  for (let i = 0; i < o.repoFiles; i++) {
    const line = `export const v${i} = ${i}; // ${"x".repeat(40)}\n`;
    files.set(`pkg${i % 4}/src/mod${i}.js`, line.repeat(Math.max(1, Math.ceil(o.fileBytes / line.length))).slice(0, o.fileBytes));
  }
  files.set("package.json", JSON.stringify({ name: "task", version: "1.0.0" }));
  return files;
}

/** The environment's set-up: copy the repository in, then build a manifest inside the sandbox. */
async function setup(sb: Sandbox, repo: Map<string, string>): Promise<void> {
  for (const [path, text] of repo) await sb.writeFile(`task/${path}`, text);
  const r = await sb.exec(["sh", "-c", "cp -r task repo && cd repo && find . -type f | sort | xargs cat | sha256sum > ../.ready"]);
  if (r.exitCode !== 0) throw new Error(`set-up failed: ${r.stderr.trim()}`);
}

export interface StartRun {
  mode: "no pool" | "warm pool";
  latenciesMs: number[];
  makespanMs: number;
  hits: number;
  misses: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

/** Start `o.programs` programs at the fixed rate, with or without the pool; measure each start. */
export async function runStarts(provider: SandboxProvider, o: SandboxBenchOptions, pooled: boolean, log: (l: string) => void): Promise<StartRun> {
  const repo = taskRepo(o);
  const ids = Array.from({ length: o.programs }, (_, i) => `${pooled ? "pool" : "cold"}-${i}`);
  const pool = pooled
    ? createSandboxPool({ provider, clock: realClock, warmSize: o.warmSize, maxQueued: o.programs, setup: (sb) => setup(sb, repo) })
    : undefined;
  const latencies: number[] = [];
  const t0 = realClock.now();
  // The orchestrator knows which programs come next: keep the next warmSize of them in preparation.
  pool?.prepare(ids.slice(0, o.warmSize));
  const runs = ids.map(async (id, i) => {
    await realClock.sleep(Math.max(0, t0 + (i + 1) * o.intervalMs - realClock.now()));
    // Sub-millisecond timer: a prepared sandbox is handed over in well under a millisecond.
    const start = performance.now();
    let sb: Sandbox;
    if (pool) {
      sb = await pool.acquire(id);
      pool.prepare(ids.slice(i + 1, i + 1 + o.warmSize));
    } else {
      sb = await provider.create(id);
      await setup(sb, repo);
    }
    latencies.push(performance.now() - start);
    const w = await sb.exec(["sh", "-c", `cat .ready > /dev/null && sleep ${o.workMs / 1000}`]);
    if (w.exitCode !== 0) throw new Error(`program ${id} failed: ${w.stderr.trim()}`);
    if (pool) await pool.reclaim(id);
    else await sb.destroy();
  });
  try {
    await Promise.all(runs);
  } finally {
    await pool?.close();
  }
  const counts = pool?.counts();
  log(`sandbox: ${pooled ? "warm pool" : "no pool"}: ${o.programs} programs started`);
  return {
    mode: pooled ? "warm pool" : "no pool",
    latenciesMs: latencies.sort((a, b) => a - b),
    makespanMs: realClock.now() - t0,
    hits: counts ? counts.acquired.hit + counts.acquired.in_flight : 0,
    misses: counts ? counts.acquired.miss : o.programs,
  };
}

const ratio = (a: number, b: number): number | string => (b === 0 ? "—" : a / b);

/** The comparison table: one row per mode, ratios against the run without a pool. */
export function sandboxTable(o: SandboxBenchOptions, runs: readonly StartRun[]): BenchTable {
  const base = runs[0] as StartRun;
  const p = (r: StartRun, q: number): number => percentile(r.latenciesMs, q);
  const total = (r: StartRun): number => r.latenciesMs.reduce((s, x) => s + x, 0);
  return {
    title: `sandbox start latency: ${o.programs} programs, one every ${o.intervalMs} ms (bwrap, wall clock)`,
    columns: ["mode", "programs", "warm size", "p50 (ms)", "p99 (ms)", "mean (ms)", "total (s)", "makespan (s)", "prepared hits", "misses", "p50 ×", "p99 ×", "total ×"],
    rows: runs.map((r) => [
      r.mode,
      r.latenciesMs.length,
      r.mode === "warm pool" ? o.warmSize : 0,
      p(r, 50),
      p(r, 99),
      total(r) / Math.max(1, r.latenciesMs.length),
      total(r) / 1000,
      r.makespanMs / 1000,
      r.hits,
      r.misses,
      ratio(p(base, 50), p(r, 50)),
      ratio(p(base, 99), p(r, 99)),
      ratio(total(base), total(r)),
    ]),
    notes: [
      `start latency = "start program" → sandbox created and set up (copy a ${o.repoFiles}-file task repository of ${o.fileBytes} B files in, cp -r + find | sha256sum inside); each program then works ${o.workMs} ms and its sandbox is reclaimed`,
      "warm pool: the orchestrator keeps the next `warm size` programs in preparation (ThunderAgent asynchronous preparation); prepared hits = acquires that found their sandbox prepared or in preparation",
      "× = no-pool value / this row's value (higher is better); wall-clock times on a shared machine vary between runs",
    ],
  };
}

/** The sandbox benchmark. */
export const sandboxBench: Benchmark = {
  name: "sandbox",
  description: "program start latency (sandbox + environment set-up) with and without the warm pool, on real bwrap sandboxes",
  async run(opts: BenchOptions) {
    const o = sandboxBenchOptions(opts.quick);
    const root = mkdtempSync(join(tmpdir(), "arbor-bench-sandbox-"));
    chmodSync(root, 0o755); // the sandbox uid must reach its workspace
    const provider = createBwrapProvider({ root, limits: { cpuSeconds: 10, memoryMb: 512, wallMs: 60_000 } });
    try {
      const cold = await runStarts(provider, o, false, opts.log);
      const warm = await runStarts(provider, o, true, opts.log);
      return [sandboxTable(o, [cold, warm])];
    } finally {
      await provider.destroyAll();
      rmSync(root, { recursive: true, force: true });
    }
  },
};
