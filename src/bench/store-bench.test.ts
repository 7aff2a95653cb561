import { describe, expect, it } from "vitest";
import { postgresQuery, postgresUnreachable, POSTGRES_TEST_URL } from "../testing/postgres-test-db.js";
import { getBenchmark } from "./registry.js";
import { runStoreBench, storeBenchConfig, storeTable } from "./store-bench.js";

const unreachable = await postgresUnreachable();

describe("arbor bench store", () => {
  it.skipIf(unreachable !== undefined)(`writes and reads the same run in SQLite and Postgres, with the ratio row (${unreachable ?? POSTGRES_TEST_URL})`, async () => {
    const cfg = { ...storeBenchConfig(true), programs: 4, groupSize: 2, turns: 3, postgresUrl: POSTGRES_TEST_URL };
    const lines: string[] = [];
    const [t] = await runStoreBench(cfg, (l) => lines.push(l));
    expect(t?.columns).toEqual(["store", "trajectories", "calls", "tokens", "write traj/s", "write calls/s", "list traj/s", "get traj/s"]);
    expect(t?.rows.map((r) => r.slice(0, 4))).toEqual([
      ["sqlite", 4, 12, 4 * (300 + 550 + 800 + 3 * 50)],
      ["postgres", 4, 12, 4 * (300 + 550 + 800 + 3 * 50)],
      ["postgres / sqlite", "", "", ""],
    ]);
    for (const row of t?.rows ?? []) for (const v of row.slice(4)) expect(v).toBeGreaterThan(0);
    const schema = lines.map((l) => /schema (arbor_bench_[0-9a-f]+)/.exec(l)?.[1]).find((x) => x !== undefined);
    expect(schema).toBeDefined();
    // This run's throwaway schema is gone (other tests may bench at the same time, with schemas of their own).
    expect(await postgresQuery(`SELECT nspname FROM pg_namespace WHERE nspname = '${schema}'`)).toEqual([]);
  }, 60_000);

  it("reports an unreachable Postgres in the notes and keeps the SQLite row", async () => {
    const cfg = { ...storeBenchConfig(true), programs: 2, groupSize: 2, turns: 2, postgresUrl: "postgres://postgres@127.0.0.1:1/test" };
    const [t] = await runStoreBench(cfg, () => undefined);
    expect(t?.rows.map((r) => r[0])).toEqual(["sqlite"]);
    expect(t?.notes?.some((n) => /postgres: not measured: .*cannot connect/.test(n))).toBe(true);
  }, 60_000);

  it("is registered, and the ratio is postgres speed over sqlite speed", () => {
    expect(getBenchmark("store").name).toBe("store");
    const run = { trajectories: 10, calls: 20, tokens: 100, listS: 1, getS: 1 };
    const t = storeTable([{ ...run, store: "sqlite", writeS: 1 }, { ...run, store: "postgres", writeS: 4 }], storeBenchConfig(true));
    expect(t.rows[2]?.[4]).toBe(0.25);
  });
});
