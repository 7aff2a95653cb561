// `arbor bench scale` in its quick form: real service processes, one and two workers, a row each with its ratio.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { natsUnreachable } from "../testing/arbor-services.js";
import { postgresUnreachable } from "../testing/postgres-test-db.js";
import { runScaleBench, scaleBenchConfig } from "./scale-bench.js";

const unreachable = (await postgresUnreachable()) ?? (await natsUnreachable());

describe.skipIf(unreachable !== undefined)(`arbor bench scale${unreachable ? ` (skipped: ${unreachable})` : ""}`, () => {
  it("runs the same workload with 1 and 2 worker processes and prints programs per second with the ratio", async () => {
    const lines: string[] = [];
    const arbor = [process.execPath, join(import.meta.dirname, "../../bin/arbor.mjs")];
    const [table] = await runScaleBench(scaleBenchConfig(true), arbor, (l) => lines.push(l));
    expect(table!.columns).toEqual(["workers", "programs", "elapsed s", "programs/s", "× 1 worker"]);
    expect(table!.rows.map((r) => r[0])).toEqual([1, 2]);
    for (const r of table!.rows) {
      expect(r[1]).toBe(4);
      expect(Number(r[3])).toBeGreaterThan(0);
    }
    expect(table!.rows[0]![4]).toBe("1.00");
    expect(lines).toContain("2 worker(s): running 4 programs");
  }, 300_000);
});
