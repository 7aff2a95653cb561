// Runs one system of a workload in a worker thread (system-worker.mjs), so that `arbor sim --jobs N` runs N
// systems at once on N cores. The result is the one an in-process run gives (a structured clone of it: same
// numbers, same JSON), and a failure comes back as an error naming the system.
import { totalmem } from "node:os";
import { getHeapStatistics } from "node:v8";
import { Worker } from "node:worker_threads";
import { ArborError } from "../../core/errors.js";
import type { SimRunOptions } from "./scenario.js";
import type { SimSystemResult } from "./sim-report.js";

/** The registry module beside this one, as the worker must import it (.ts when running from the sources). */
const REGISTRY = new URL(import.meta.url.endsWith(".ts") ? "./registry.ts" : "./registry.js", import.meta.url).href;

/** One system's run in a worker thread: its result, and the run's wall and CPU time (the thread's start excluded). */
export interface WorkerRun {
  result: SimSystemResult;
  wallMs: number;
  /** The process's CPU time (user + system, every thread) while the system ran. */
  cpuMs: number;
}

interface WorkerReply {
  /** [done, total] as the run advances (every message before the last). */
  progress?: [number, number];
  result?: SimSystemResult;
  wallMs?: number;
  cpuMs?: number;
  /** `code`: the error was an ArborError with this code. */
  error?: { message: string; code?: string; stack?: string };
}

/**
 * The young generation of each worker, MB (V8 makes a 128 MB new space of it, where a default heap has 32): a
 * simulation's medium-lived objects (a step's plan and sampled tokens, a lookup's arrays, and when this was
 * measured requests' token arrays, now off the heap) outlive a smaller nursery and are copied again and again.
 * On seer-moonlight at scale 0.25 in a worker this cut scavenge time from 6.0 s to 3.6 s and the run from 57 s
 * to 49 s; at 0.5 (main thread, the same new space) scavenges went from 24 s to 10 s.
 */
export const WORKER_YOUNG_GENERATION_MB = 192;

/** Share of the machine's memory the worker threads of one run may fill with their heaps, together. */
const MEMORY_SHARE = 0.75;

/**
 * Heap limit of each of `jobs` worker threads, MB: an equal share of three quarters of the machine's memory,
 * and never less than this thread's own limit. A full-scale system holds gigabytes (seer-moonlight: over 4 GB),
 * and V8's default limit (a quarter of the memory, at most ~4 GB) would have it collect garbage nearly all the
 * time near the limit.
 */
export function workerHeapMb(jobs: number): number {
  const own = Math.floor(getHeapStatistics().heap_size_limit / 2 ** 20);
  return Math.max(own, Math.floor((MEMORY_SHARE * totalmem()) / 2 ** 20 / jobs));
}

/**
 * Run `system` of `workload` (a shipped workload's name or a workload file's path, as `getScenario` takes
 * it) in a worker thread whose heap may reach `heapMb` (default: workerHeapMb(1)). Rejects with the worker's
 * own error (an ArborError keeps its code) or, when the thread dies (out of memory), with an error naming the
 * system; `signal` stops the thread and rejects. `o.onAdvance` is told the run's progress the thread reports.
 */
export function runSystemInWorker(workload: string, system: string, o: SimRunOptions, signal?: AbortSignal, heapMb = workerHeapMb(1)): Promise<WorkerRun> {
  if (signal?.aborted) return Promise.reject(new Error(`sim ${workload}: system ${system}: aborted`));
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./system-worker.mjs", import.meta.url), {
      workerData: { arborSimSystem: { registry: REGISTRY, workload, system, seed: o.seed, scale: o.scale, progress: o.onAdvance !== undefined } },
      resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
      execArgv: [],
    });
    let settled = false;
    const onAbort = (): void => {
      settle(() => reject(new Error(`sim ${workload}: system ${system}: aborted`)));
      void worker.terminate();
    };
    const settle = (f: () => void): void => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      f();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    worker.on("message", (m: WorkerReply) => {
      if (m.progress !== undefined) {
        if (!settled) o.onAdvance?.(m.progress[0], m.progress[1]);
        return;
      }
      settle(() => {
        if (m.result !== undefined) resolve({ result: m.result, wallMs: m.wallMs ?? 0, cpuMs: m.cpuMs ?? 0 });
        else if (m.error?.code !== undefined) reject(new ArborError(m.error.message, m.error.code));
        else reject(Object.assign(new Error(m.error?.message ?? `sim ${workload}: system ${system}: the worker sent no result`), { stack: m.error?.stack }));
      });
      void worker.terminate();
    });
    worker.once("error", (e) => settle(() => reject(new Error(`sim ${workload}: system ${system}: worker thread failed: ${e.message}`, { cause: e }))));
    worker.once("exit", (code) => settle(() => reject(new Error(`sim ${workload}: system ${system}: worker thread exited (code ${code}) without a result`))));
  });
}
