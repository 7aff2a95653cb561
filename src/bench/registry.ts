// Benchmarks by name, for `arbor bench <name>` and `npm run bench -- <name>`.
import { ArborError } from "../core/errors.js";
import type { Benchmark } from "./bench.js";
import { BENCHMARK_NAMES, type BenchmarkName } from "./benchmark-names.js";
import { engineBench } from "./engine-bench.js";
import { pausingBench } from "./pausing-bench.js";
import { schedulingBench } from "./scheduling-bench.js";
import { gatewayBench } from "./gateway-bench.js";
import { sandboxBench } from "./sandbox-bench.js";
import { scaleBench } from "./scale-bench.js";
import { simBench } from "./sim-bench.js";
import { specdecBench } from "./specdec-bench.js";
import { storeBench } from "./store-bench.js";
import { treeBench } from "./tree-bench.js";

// Typed by the names list: a benchmark missing here or not listed there does not compile.
const BENCHMARKS: Record<BenchmarkName, Benchmark> = {
  engine: engineBench,
  pausing: pausingBench,
  scheduling: schedulingBench,
  gateway: gatewayBench,
  sandbox: sandboxBench,
  tree: treeBench,
  store: storeBench,
  scale: scaleBench,
  specdec: specdecBench,
  sim: simBench,
};

/** Names of the registered benchmarks. */
export const benchmarkNames: readonly string[] = BENCHMARK_NAMES;

/** Look a benchmark up by name; an unknown name is an ArborError listing the known ones. */
export function getBenchmark(name: string): Benchmark {
  const b = Object.hasOwn(BENCHMARKS, name) ? BENCHMARKS[name as BenchmarkName] : undefined;
  if (!b) throw new ArborError(`unknown benchmark '${name}' (known: ${benchmarkNames.join(", ")})`, "config");
  return b;
}
