// The worker thread of `arbor sim --jobs N`: runs one system of one workload and posts its result back
// (scenario runs are synchronous and CPU-bound, so systems run side by side only in threads of their own).
// Plain JavaScript because a worker thread cannot load TypeScript without a loader: when the parent runs
// from the sources (development, tests), the registry it names is a .ts file and tsx's loader is
// registered first. The message is { result } or { error: { message, code, stack } }, code set for an
// ArborError only (a user-facing error, printed as it is).
import { parentPort, workerData } from "node:worker_threads";

const { registry, workload, system, seed, scale } = workerData.arborSimSystem;
try {
  if (registry.endsWith(".ts")) {
    const { register } = await import("tsx/esm/api");
    register();
  }
  const { getScenario } = await import(registry);
  const scenario = await getScenario(workload);
  parentPort.postMessage({ result: await scenario.run(system, { seed, scale }) });
} catch (e) {
  parentPort.postMessage({ error: { message: e instanceof Error ? e.message : String(e), code: e instanceof Error && e.name === "ArborError" ? e.code : undefined, stack: e instanceof Error ? e.stack : undefined } });
}
