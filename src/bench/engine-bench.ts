// `arbor bench engine`: the built-in engine's benchmark tables (issue 3 item 7).
import type { Benchmark } from "./bench.js";
import { costModelCalibration } from "./costmodel-calibration.js";
import { llamacppThroughput } from "./llamacpp-throughput.js";

/** The engine benchmark. */
export const engineBench: Benchmark = {
  name: "engine",
  description: "built-in engine: cost-model calibration, llama.cpp executor throughput",
  async run(opts) {
    return [...costModelCalibration(), await llamacppThroughput(opts)];
  },
};
