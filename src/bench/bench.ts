// The benchmark contract: each optimization ships a benchmark that runs it beside its baseline in
// one run and reports tables (with the ratio), printed by `arbor bench <name>`.

/** One printed table. */
export interface BenchTable {
  title: string;
  columns: string[];
  rows: (string | number)[][];
  /** Lines printed under the table (sources, how to read it). */
  notes?: string[];
}

export interface BenchOptions {
  /** Smaller workloads (tests, CI smoke runs); the numbers are then indicative only. */
  quick: boolean;
  /** Progress lines. */
  log: (line: string) => void;
  /**
   * Runs `arbor run` on one of the package's example configs (`configPath` relative to the package, e.g.
   * `examples/quickstart.yaml`; its output under the working directory) and returns its store's path, for
   * benchmarks that read batches from a real run (the CLI passes its own run command in: benchmarks sit below the
   * CLI in the layer order).
   */
  runConfig?: (configPath: string, log: (line: string) => void) => Promise<string>;
  /** The argv that runs the `arbor` command (the CLI passes its own), for benchmarks that start Arbor's services. */
  arbor?: readonly string[];
}

export interface Benchmark {
  name: string;
  description: string;
  run(opts: BenchOptions): Promise<BenchTable[]>;
}
