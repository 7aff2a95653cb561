// The worker thread of `arbor sim --jobs N`: runs one system of one workload and posts its result back
// (scenario runs are synchronous and CPU-bound, so systems run side by side only in threads of their own).
// Plain JavaScript because a worker thread cannot load TypeScript without a loader: when the parent runs
// from the sources (development, tests), the registry it names is a .ts file and tsx's loader is
// registered first. The last message is { result, wallMs, cpuMs } (the run's wall time and the process's CPU time
// while it ran) or { error: { message, code, stack } }, code set for an ArborError only (a user-facing error);
// before it, { progress: [done, total] } as the run advances, at most every PROGRESS_MS of wall time.

import { performance } from "node:perf_hooks";
import { parentPort, workerData } from "node:worker_threads";

const { registry, workload, system, seed, scale, progress } = workerData.arborSimSystem;
/** Least wall time between two progress messages, ms (a full-scale run finishes tens of thousands of requests). */
const PROGRESS_MS = 200;
let lastProgress = -Infinity;
const onAdvance = (done, total) => {
  const now = performance.now();
  if (now - lastProgress < PROGRESS_MS && done < total) return;
  lastProgress = now;
  parentPort.postMessage({ progress: [done, total] });
};
try {
  if (registry.endsWith(".ts")) {
    const { register } = await import("tsx/esm/api");
    register();
  }
  const { getScenario } = await import(registry);
  const scenario = await getScenario(workload);
  // The run alone is timed (not the thread's start and its imports): `arbor bench sim` reports it.
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const result = await scenario.run(system, { seed, scale, ...(progress ? { onAdvance } : {}) });
  const cpu = process.cpuUsage(cpu0);
  parentPort.postMessage({ result, wallMs: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 });
} catch (e) {
  parentPort.postMessage({ error: { message: e instanceof Error ? e.message : String(e), code: e instanceof Error && e.name === "ArborError" ? e.code : undefined, stack: e instanceof Error ? e.stack : undefined } });
}
