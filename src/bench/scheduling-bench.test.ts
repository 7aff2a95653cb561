import { describe, expect, it } from "vitest";
import { getBenchmark } from "./registry.js";
import { SCHEDULING_BENCH_POLICIES, SCHEDULING_BENCH_WINDOWS, schedulingBenchConfig } from "./scheduling-bench.js";

describe("arbor bench scheduling (quick)", () => {
  it("seer beats fifo-group on the fixed seed, its gap to oracle-lfs is printed, and async windows trade staleness for throughput", async () => {
    const tables = await getBenchmark("scheduling").run({ quick: true, log: () => {} });
    expect(tables).toHaveLength(2);
    const [policies, windows] = tables as [NonNullable<(typeof tables)[0]>, NonNullable<(typeof tables)[0]>];

    expect(policies.rows.map((r) => r[0])).toEqual([...SCHEDULING_BENCH_POLICIES]);
    const col = (name: string) => {
      const i = policies.columns.indexOf(name);
      expect(i, name).toBeGreaterThanOrEqual(0);
      return (policy: string) => policies.rows.find((r) => r[0] === policy)?.[i] as number;
    };
    const iteration = col("iteration (s)");
    expect(iteration("seer")).toBeLessThan(iteration("fifo-group"));
    expect(col("speedup ×")("fifo-group")).toBe(1);
    expect(col("speedup ×")("seer")).toBeGreaterThan(1);
    expect(col("of oracle")("oracle-lfs")).toBe(1);
    expect(col("of oracle")("seer")).toBeGreaterThan(0);
    expect(col("of oracle")("seer")).toBeLessThanOrEqual(1);
    // Divided rollout keeps instances from oversubscribing KV; the group-bound baseline preempts.
    expect(col("preemptions")("seer")).toBeLessThan(col("preemptions")("fifo-group"));
    for (const p of SCHEDULING_BENCH_POLICIES) {
      expect(col("tokens/s")(p)).toBeGreaterThan(0);
      expect(col("tail (s)")(p)).toBeGreaterThan(0);
      expect(col("tail (s)")(p)).toBeLessThan(iteration(p));
    }
    expect(col("recompute tok")("fifo-group")).toBe(0); // never divided, never continued

    expect(windows.columns).toEqual(["mode", "W (groups)", "W / N", "time (s)", "tokens/s", "mean staleness", "max staleness", "interrupted", "throughput ×"]);
    expect(windows.rows.map((r) => r[0])).toEqual(["sync", ...SCHEDULING_BENCH_WINDOWS.map(() => "async")]);
    const [sync, ...async] = windows.rows as (string | number)[][];
    expect(sync?.[5]).toBe(0); // synchronous RL is never stale
    const w = async.map((r) => r[1] as number);
    expect(w).toEqual([...w].sort((a, b) => a - b));
    const { maxStaleness: eta, batchGroups: b } = schedulingBenchConfig(true).async;
    for (const r of async) {
      expect(r[5]).toBeGreaterThan(0);
      expect(r[6]).toBeLessThanOrEqual(eta + Math.floor(((r[1] as number) - 2) / b + 1));
      expect(r[8]).toBeGreaterThan(1); // async outpaces sync on this workload
    }
    // The widest window is at least as fast as the narrowest, and at least as stale.
    expect(async.at(-1)?.[4] as number).toBeGreaterThanOrEqual(async[0]?.[4] as number);
    expect(async.at(-1)?.[5] as number).toBeGreaterThanOrEqual(async[0]?.[5] as number);
  }, 120_000);
});
