// `arbor bench engine`: the built-in engine's benchmark tables (issue 3 item 7).
import type { Benchmark } from "./bench.js";
import { llamacppThroughput } from "./llamacpp-throughput.js";

/** The engine benchmark. */
export const engineBench: Benchmark = {
  name: "engine",
  description: "built-in engine: llama.cpp executor throughput (cost-model and prefix-cache tables follow)",
  async run(opts) {
    return [await llamacppThroughput(opts)];
  },
};
