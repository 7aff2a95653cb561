import { describe, expect, it } from "vitest";
import { runGatewayBench, type GatewayBenchResult } from "./gateway-bench.js";
import { getBenchmark } from "./registry.js";

const num = (v: string | number | undefined): number => {
  expect(typeof v).toBe("number");
  return v as number;
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("arbor bench gateway", () => {
  it("is registered", () => {
    expect(getBenchmark("gateway").name).toBe("gateway");
  });

  it("measures the token path direct vs through the gateway from child processes, records every call and ends everything it started", async () => {
    const lines: string[] = [];
    const tcpServers = () => process.getActiveResourcesInfo().filter((r) => r === "TCPServerWrap").length;
    const before = tcpServers();
    const sizes = { warmup: 4, latencyRequests: 12, latencyRounds: 2, throughputRequests: 40, concurrency: 4, maxTokens: 8, turns: 3, systemChars: 300 };
    const r: GatewayBenchResult = await runGatewayBench({ quick: true, log: (l) => lines.push(l) }, sizes);
    expect(r.tables).toHaveLength(2);
    const [lat, tp] = r.tables;

    const paths = [
      "direct: chat completion",
      "direct: the token path's 3 upstream calls",
      "gateway, memory sink",
      "gateway, SQLite store",
      "gateway, memory sink, local tokenizer",
      "gateway, SQLite store, local tokenizer",
      "relay: direct chat completion through a bare hop (Fastify + undici, no gateway logic)",
    ];
    expect(lat?.rows.map((x) => x[0])).toEqual(paths);
    const d = lat!.rows[0]!;
    for (const row of lat!.rows) {
      expect(row[1]).toBe(24); // 2 rounds of 12, pooled
      for (const c of [2, 3, 4]) expect(num(row[c])).toBeGreaterThan(0);
      expect(num(row[3])).toBeGreaterThanOrEqual(num(row[2])); // p99 >= p50
      expect(num(row[5])).toBeCloseTo(num(row[2]) - num(d[2]), 9);
      expect(num(row[6])).toBeCloseTo(num(row[3]) - num(d[3]), 9);
      expect(num(row[7])).toBeCloseTo(num(row[2]) / num(d[2]), 9);
    }
    expect(d[7]).toBe(1);
    // The figures the targets are about, printed beside them (not asserted: they are measurements).
    // The targets are read on the SQLite row with the local tokenizer.
    expect(r.addedP50Ms).toBeCloseTo(num(lat!.rows[5]![5]), 9);
    expect(r.sqliteAddedP50Ratio).toBeCloseTo(num(lat!.rows[5]![5]) / num(lat!.rows[4]![5]), 9);
    expect(lat!.notes).toContainEqual(expect.stringMatching(/^added p50 through the gateway with the SQLite store and the local tokenizer: -?[\d.]+ ms \(target <= 0\.5 ms: (met|NOT met)\)$/));
    expect(lat!.notes).toContainEqual(expect.stringContaining("POST /p/{id}/v1/chat/completions on a vLLM-protocol token backend"));
    // The target row's added p50 in each round, beside the pooled figure.
    expect(lat!.notes).toContainEqual(expect.stringMatching(/^the same, round by round \(2 round\(s\) of 12 requests per path, pooled in the table\): -?[\d.]+ \/ -?[\d.]+ ms$/));
    const floor = num(lat!.rows[1]![5]);
    const engineTokenizing = num(lat!.rows[3]![5]);
    // The bare hop's share of the target row's added latency, and what is left for the gateway's own work.
    const hop = num(lat!.rows[6]![5]);
    expect(r.relayAddedP50Ms).toBeCloseTo(hop, 9);
    expect(lat!.notes).toContainEqual(
      `of that ${r.addedP50Ms.toFixed(3)} ms, a bare hop through the same HTTP stack (last row) adds ${hop.toFixed(3)} ms; the gateway's own work (token path, template and tokenizer, recording, metrics): ${(r.addedP50Ms - hop).toFixed(3)} ms`,
    );
    expect(lat!.notes).toContainEqual(
      `with the engine tokenizing (row 4): ${engineTokenizing.toFixed(3)} ms added, of which the token path's 3 upstream round trips (row 2): ${floor.toFixed(3)} ms; the gateway's own processing: ${(engineTokenizing - floor).toFixed(3)} ms`,
    );

    expect(tp?.rows.map((x) => x[0])).toEqual([paths[0], paths[3], paths[4], paths[5], paths[6]]);
    const direct = num(tp!.rows[0]![3]);
    for (const row of tp!.rows) {
      expect(row[1]).toBe(4);
      expect(row[2]).toBe(40);
      expect(num(row[3])).toBeGreaterThan(0);
      expect(num(row[4])).toBeCloseTo(num(row[3]) / direct, 9);
    }
    expect(r.gatewayRps).toBe(tp!.rows[3]![3]);
    expect(tp!.rows[0]![7]).toBe("-");
    for (const row of tp!.rows.slice(1)) expect(num(row[8])).toBeCloseTo(1000 / num(row[7]), 9);
    expect(r.gatewayCpuMsPerRequest).toBe(tp!.rows[3]![7]);
    expect(r.gatewayCpuMsPerRequest3Rt).toBe(tp!.rows[1]![7]);
    // The load generator's and the upstream's CPU per request on every path (they share the machine's cores), and what
    // the target rate leaves the gateway once they have theirs.
    for (const row of tp!.rows) {
      expect(num(row[9])).toBeGreaterThan(0);
      // /proc counts in 10 ms ticks, more than this test's few requests may take the upstream.
      expect(num(row[10])).toBeGreaterThanOrEqual(0);
    }
    const budget = (tp!.notes ?? []).find((n) => n.startsWith("CPU budget at the target: "));
    const load = num(tp!.rows[3]![9]).toFixed(3);
    const upstream = num(tp!.rows[3]![10]).toFixed(3);
    expect(budget).toMatch(new RegExp(`^CPU budget at the target: \\d+ cores / 5000 req/s = [\\d.]+ ms per request for the three processes together; on the SQLite \\+ local tokenizer row the load generator took ${load} and the upstream ${upstream}, leaving -?[\\d.]+ ms for the gateway, which used ${r.gatewayCpuMsPerRequest.toFixed(3)} \\((within|over) it\\)$`));
    expect(tp!.notes).toContainEqual(expect.stringMatching(/^requests\/s through the gateway with the SQLite store and the local tokenizer: \d+ \(target >= 5000 on 2 cores: (met|NOT met)\)$/));
    // The bare relay's rate under the same load (the ceiling of any gateway on this stack here), with its CPU per request.
    expect(r.relayRps).toBe(tp!.rows[4]![3]);
    expect(tp!.notes).toContainEqual(
      expect.stringMatching(/^a bare hop through the gateway's HTTP stack \(last row: Fastify \+ undici, no gateway logic, CPU [\d.]+ ms\/req\) carries \d+ req\/s here, (above|below) the 5000 target: .* the gateway reaches [\d.]+ of it$/),
    );

    // Per gateway: 2 rounds of 4 warm-up + 12 latency requests, then (all but the memory sink with the engine
    // tokenizing) 4 warm-up + 40 throughput requests, all recorded.
    expect(r.sent).toEqual({ memory: 32, sqlite: 76, memoryLocal: 76, sqliteLocal: 76 });
    expect(r.recorded).toEqual(r.sent);
    // Per SQLite gateway, programs of 3 turns: 16 latency requests in 6 programs per round, 44 throughput requests
    // in at least 15 (4 clients, each ending its last program early); each was released, so every one ended completed.
    expect(r.programs.created).toBeGreaterThanOrEqual(2 * (2 * 6 + 15));
    expect(r.programs.completed).toBe(r.programs.created);
    // Every later turn continued its program's token history (none re-tokenized from scratch).
    expect(r.contextResets).toEqual({ memory: 0, memoryLocal: 0 });
    expect(lines.some((l) => l.includes("throughput"))).toBe(true);

    // Nothing left: every server refuses connections, no server handle remains, the child processes have exited.
    expect(r.urls).toHaveLength(6);
    for (const url of r.urls) {
      await expect(fetch(url)).rejects.toThrow(/fetch failed/);
    }
    expect(tcpServers()).toBe(before);
    expect(r.childPids.length).toBeGreaterThanOrEqual(1);
    for (const pid of r.childPids) expect(alive(pid)).toBe(false);
  }, 300_000);

  it("rejects bad sizes naming the field", async () => {
    await expect(
      runGatewayBench(
        { quick: true, log: () => {} },
        { warmup: 1, latencyRequests: 0, throughputRequests: 1, concurrency: 1, maxTokens: 1, turns: 1, systemChars: 0 },
      ),
    ).rejects.toThrow(/sizes\.latencyRequests: must be an integer >= 1, got 0/);
  });
});
