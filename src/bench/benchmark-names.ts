// The names of the registered benchmarks, apart from their implementations: `arbor --help` lists them without
// loading every benchmark (and through them the engines and the trainer). registry.ts is typed by this list,
// so the compiler keeps the two equal.

/** Names of the registered benchmarks, in the order `arbor bench --help` lists them. */
export const BENCHMARK_NAMES = ["engine", "pausing", "scheduling", "gateway", "sandbox", "tree", "store", "scale", "specdec", "sim"] as const;

/** One registered benchmark's name. */
export type BenchmarkName = (typeof BENCHMARK_NAMES)[number];
