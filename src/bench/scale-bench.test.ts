// `arbor bench scale` in its quick form: real service processes, one and two workers, a row each with its ratio;
// then two mixed llama.cpp engines against a prefill + decode pair behind a `type: disagg` backend.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { natsUnreachable } from "../testing/arbor-services.js";
import { postgresUnreachable } from "../testing/postgres-test-db.js";
import { redisUnreachable } from "../testing/redis-test.js";
import { runScaleBench, scaleBenchConfig } from "./scale-bench.js";

const unreachable = (await postgresUnreachable()) ?? (await natsUnreachable()) ?? (await redisUnreachable());

describe.skipIf(unreachable !== undefined)(`arbor bench scale${unreachable ? ` (skipped: ${unreachable})` : ""}`, () => {
  it("runs the same workload with 1 and 2 worker processes, then on two mixed engines and on a prefill/decode pair, with programs per second and the ratios", async () => {
    const lines: string[] = [];
    const arbor = [process.execPath, join(import.meta.dirname, "../../bin/arbor.mjs")];
    const [table, disagg] = await runScaleBench(scaleBenchConfig(true), arbor, (l) => lines.push(l));
    expect(table!.columns).toEqual(["workers", "programs", "elapsed s", "programs/s", "× 1 worker"]);
    expect(table!.rows.map((r) => r[0])).toEqual([1, 2]);
    for (const r of table!.rows) {
      expect(r[1]).toBe(4);
      expect(Number(r[3])).toBeGreaterThan(0);
    }
    expect(table!.rows[0]![4]).toBe("1.00");
    expect(lines).toContain("2 worker(s): running 4 programs");
    // The same 4 programs with 2 workers on two mixed engines, then through the prefill/decode pair.
    expect(disagg!.columns).toEqual(["setup", "workers", "programs", "engine requests", "elapsed s", "programs/s", "× mixed"]);
    expect(disagg!.rows.map((r) => [r[0], r[1], r[2]])).toEqual([
      ["2 mixed engines", 2, 4],
      ["1 prefill + 1 decode (disagg)", 2, 4],
    ]);
    for (const r of disagg!.rows) expect(Number(r[5])).toBeGreaterThan(0);
    expect(disagg!.rows[0]![6]).toBe("1.00");
    expect(lines).toContain("1 prefill + 1 decode (disagg), 2 worker(s): 4 programs in " + String(disagg!.rows[1]![4]) + " s");
    // Each program made at least one call; in the pair every call went to the prefill and then the decode engine.
    expect(disagg!.rows[0]![3]).toMatch(/^m0 \d+, m1 \d+$/);
    const [, p0, d0] = /^p0 (\d+), d0 (\d+)$/.exec(String(disagg!.rows[1]![3])) ?? [];
    expect(Number(p0)).toBeGreaterThanOrEqual(4);
    expect(Number(d0)).toBeGreaterThan(0);
  }, 300_000);
});
