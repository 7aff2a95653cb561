// `arbor bench <name>`: runs a registered benchmark and prints its tables.
import { getBenchmark } from "../bench/registry.js";
import { formatTable } from "../bench/format-table.js";

/** Run the named benchmark, printing progress to stderr and tables to stdout. */
export async function benchCommand(name: string, opts: { quick: boolean }): Promise<void> {
  const bench = getBenchmark(name);
  console.error(`arbor bench ${bench.name}: ${bench.description}${opts.quick ? " (quick)" : ""}`);
  const tables = await bench.run({ quick: opts.quick, log: (line) => console.error(`  ${line}`) });
  console.log(tables.map(formatTable).join("\n\n"));
}
