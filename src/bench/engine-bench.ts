// `arbor bench engine`: the built-in engine's benchmark tables (issue 3 item 7).
import type { Benchmark } from "./bench.js";
import { costModelCalibration } from "./costmodel-calibration.js";
import { llamacppThroughput } from "./llamacpp-throughput.js";
import { prefixCacheTable } from "./prefix-cache-bench.js";

/** The engine benchmark. */
export const engineBench: Benchmark = {
  name: "engine",
  description: "built-in engine: cost-model calibration, prefix caching on an agent workload, llama.cpp executor throughput",
  async run(opts) {
    return [...costModelCalibration(), prefixCacheTable(opts), await llamacppThroughput(opts)];
  },
};
