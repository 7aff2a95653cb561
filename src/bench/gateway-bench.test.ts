import { describe, expect, it } from "vitest";
import { runGatewayBench, type GatewayBenchResult } from "./gateway-bench.js";
import { getBenchmark } from "./registry.js";

const num = (v: string | number | undefined): number => {
  expect(typeof v).toBe("number");
  return v as number;
};

describe("arbor bench gateway", () => {
  it("is registered", () => {
    expect(getBenchmark("gateway").name).toBe("gateway");
  });

  it("measures latency and throughput direct vs gateway, records every call and closes its servers", async () => {
    const lines: string[] = [];
    const tcpServers = () => process.getActiveResourcesInfo().filter((r) => r === "TCPServerWrap").length;
    const before = tcpServers();
    const r: GatewayBenchResult = await runGatewayBench(
      { quick: true, log: (l) => lines.push(l) },
      { warmup: 5, latencyRequests: 40, throughputRequests: 80, concurrency: 8, maxTokens: 4 },
    );
    expect(r.tables).toHaveLength(2);
    const [lat, tp] = r.tables;

    expect(lat?.rows.map((x) => x[0])).toEqual(["direct", "gateway, memory sink", "gateway, SQLite store"]);
    const d = lat!.rows[0]!;
    for (const row of lat!.rows) {
      expect(row[1]).toBe(40);
      for (const c of [2, 3, 4]) expect(num(row[c])).toBeGreaterThan(0);
      expect(num(row[3])).toBeGreaterThanOrEqual(num(row[2])); // p99 >= p50
      expect(num(row[5])).toBeCloseTo(num(row[2]) - num(d[2]), 9);
      expect(num(row[6])).toBeCloseTo(num(row[3]) - num(d[3]), 9);
      expect(num(row[7])).toBeCloseTo(num(row[2]) / num(d[2]), 9);
      expect(num(row[8])).toBeCloseTo(num(row[3]) / num(d[3]), 9);
    }
    expect(d[7]).toBe(1);
    // The ratio the target is about, printed with the target (not asserted: it is a measurement).
    expect(r.sqliteAddedP50Ratio).toBeCloseTo(num(lat!.rows[2]![5]) / num(lat!.rows[1]![5]), 9);
    expect(lat!.notes?.some((n) => n.startsWith(`SQLite store added p50 / memory sink added p50 = ${r.sqliteAddedP50Ratio.toFixed(2)} (target <= 1.3: `))).toBe(true);

    expect(tp?.rows.map((x) => x[0])).toEqual(["direct", "gateway, memory sink", "gateway, SQLite store"]);
    const direct = num(tp!.rows[0]![3]);
    for (const row of tp!.rows) {
      expect(row[1]).toBe(8);
      expect(row[2]).toBe(80);
      expect(num(row[3])).toBeGreaterThan(0);
      expect(num(row[4])).toBeCloseTo(num(row[3]) / direct, 9);
    }

    // Warm-ups (5 latency + 10 throughput) + 40 latency + 80 throughput per gateway, all recorded.
    expect(r.sent).toEqual({ memory: 135, sqlite: 135 });
    expect(r.recorded).toEqual(r.sent);
    expect(lines.some((l) => l.includes("throughput"))).toBe(true);

    // Nothing left listening: every server refuses connections and no server handle remains.
    expect(r.urls).toHaveLength(3);
    for (const url of r.urls) {
      await expect(fetch(url)).rejects.toThrow(/fetch failed/);
    }
    expect(tcpServers()).toBe(before);
  }, 60_000);

  it("rejects bad sizes naming the field", async () => {
    await expect(
      runGatewayBench({ quick: true, log: () => {} }, { warmup: 1, latencyRequests: 0, throughputRequests: 1, concurrency: 1, maxTokens: 1 }),
    ).rejects.toThrow(/sizes\.latencyRequests: must be an integer >= 1, got 0/);
  });
});
