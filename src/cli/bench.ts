// `arbor bench <name>`: runs a registered benchmark and prints its tables.
import { join } from "node:path";
import { getBenchmark } from "../bench/registry.js";
import { formatTable } from "../bench/format-table.js";
import { PACKAGE_ROOT, loadShippedExample } from "./shipped-example.js";

/** Run the named benchmark, printing progress to stderr and tables to stdout. */
export async function benchCommand(name: string, opts: { quick: boolean }): Promise<void> {
  const bench = getBenchmark(name);
  console.error(`arbor bench ${bench.name}: ${bench.description}${opts.quick ? " (quick)" : ""}`);
  // Loaded on demand: the run's wiring is only needed by a benchmark that reads a real run and finds none.
  const runConfig = async (path: string, log: (line: string) => void): Promise<string> => {
    const { runIteration } = await import("./run.js");
    return (await runIteration(loadShippedExample(path), { progress: false, log })).storePath;
  };
  // This very CLI: benchmarks that start Arbor's services run them as `arbor serve …` processes.
  const arbor = [process.execPath, join(PACKAGE_ROOT, "bin/arbor.mjs")];
  const tables = await bench.run({ quick: opts.quick, log: (line) => console.error(`  ${line}`), runConfig, arbor });
  console.log(tables.map(formatTable).join("\n\n"));
}
