// `arbor bench gateway` (issue 4 item 10): what the gateway adds over calling a fast upstream
// directly, on loopback in one run: per-request latency (p50/p99/mean) and max requests/s.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createBuiltinBackend } from "../backends/builtin.js";
import { startFakeVllm, type FakeVllm } from "../backends/fake-vllm.js";
import { ArborError } from "../core/errors.js";
import type { Call, TraceSink } from "../core/types.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";

/** Workload sizes; every count is bounded so a run always ends. */
export interface GatewayBenchSizes {
  /** Untimed requests per path before each measurement. */
  warmup: number;
  /** Sequential timed requests per path (latency table). */
  latencyRequests: number;
  /** Timed requests per path in the throughput table. */
  throughputRequests: number;
  /** Concurrent clients in the throughput table. */
  concurrency: number;
  /** max_tokens of every request. */
  maxTokens: number;
}

export const QUICK_SIZES: GatewayBenchSizes = { warmup: 30, latencyRequests: 150, throughputRequests: 240, concurrency: 16, maxTokens: 8 };
export const FULL_SIZES: GatewayBenchSizes = { warmup: 300, latencyRequests: 2000, throughputRequests: 4000, concurrency: 16, maxTokens: 8 };

/** The tables plus what the run checked and used, for tests. */
export interface GatewayBenchResult {
  tables: BenchTable[];
  /** Requests sent through each gateway (warm-ups included) and calls its sink recorded. */
  sent: { memory: number; sqlite: number };
  recorded: { memory: number; sqlite: number };
  /** Base URLs of the servers the run started (all closed when it returns). */
  urls: string[];
  /** The SQLite row's added p50 over the memory row's (the target is at most {@link SQLITE_ADDED_P50_TARGET}). */
  sqliteAddedP50Ratio: number;
}

/** The SQLite store may add at most this multiple of the in-memory sink's added p50 latency. */
export const SQLITE_ADDED_P50_TARGET = 1.3;

/** An in-memory sink that keeps every call (the cheapest recording the gateway can do). */
class MemorySink implements TraceSink {
  readonly calls: Call[] = [];
  async recordCall(call: Call): Promise<void> {
    this.calls.push(call);
  }
}

type Target = { name: string; send: (programId: string, i: number) => Promise<void> };

const PER_REQUEST_TIMEOUT_MS = 30_000;

async function post(url: string, body: object): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(PER_REQUEST_TIMEOUT_MS),
  });
  // Read the whole answer: the client's cost includes receiving it, and the socket goes back to the pool.
  const text = await res.text();
  if (res.status !== 200) {
    throw new ArborError(`gateway bench: POST ${url} answered HTTP ${res.status}: ${text.slice(0, 200)}`);
  }
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: number[], p: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? NaN;
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

async function runClients(target: Target, requests: number, clients: number, programIdOf: (client: number) => string): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(clients, requests) }, async (_, c) => {
      while (next < requests) await target.send(programIdOf(c), next++);
    }),
  );
}

/**
 * Run the gateway benchmark: a fake vLLM upstream, one gateway recording into memory and one into
 * a SQLite store (temp file), measured against direct calls. Throws if any call went unrecorded.
 */
export async function runGatewayBench(opts: BenchOptions, sizes: GatewayBenchSizes = opts.quick ? QUICK_SIZES : FULL_SIZES): Promise<GatewayBenchResult> {
  for (const [k, v] of Object.entries(sizes)) {
    if (!(Number.isInteger(v) && v >= 1)) throw new ArborError(`gateway bench sizes.${k}: must be an integer >= 1, got ${v}`, "config");
  }
  const runId = "gateway-bench";
  const clientIds = Array.from({ length: sizes.concurrency }, (_, c) => `client-${c}`);
  const programIds = ["latency", ...clientIds];
  const dir = mkdtempSync(join(tmpdir(), "arbor-gateway-bench-"));
  const memory = new MemorySink();
  let store: SqliteTrajectoryStore | undefined;
  let fake: FakeVllm | undefined;
  const gateways: Gateway[] = [];
  const urls: string[] = [];
  const sent = { memory: 0, sqlite: 0 };
  try {
    // The store's defaults (synchronous=full: every recorded call is fsynced), as `arbor run` opens it;
    // its gateway owns the programs, created below through POST /programs as a rollout creates them.
    store = new SqliteTrajectoryStore(join(dir, "store.db"));
    await store.createRun({ id: runId, name: runId, configJson: "{}", startedAt: 0 });
    await store.createGroup({ id: "g", runId, taskId: "t", programIds: [] });

    fake = await startFakeVllm();
    urls.push(fake.url);
    const backend = createBuiltinBackend({ name: "fake", url: fake.url });
    const gatewayUrl = async (recording: { sink: TraceSink } | { store: SqliteTrajectoryStore; runId: string }): Promise<string> => {
      const g = createGateway({ backends: [backend], ...recording });
      gateways.push(g);
      const url = await g.listen("127.0.0.1", 0);
      urls.push(url);
      return url;
    };
    const memUrl = await gatewayUrl({ sink: memory });
    const sqlUrl = await gatewayUrl({ store, runId });
    for (const [i, id] of programIds.entries()) {
      const res = await fetch(`${sqlUrl}/programs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id, group_id: "g", task_id: "t", sample_index: i }),
      });
      if (res.status !== 201) throw new ArborError(`gateway bench: POST /programs answered HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
    }

    const messages = (i: number) => [{ role: "user", content: `request ${i}: say something short` }];
    const clientBody = (i: number) => ({ model: "fake-model", messages: messages(i), max_tokens: sizes.maxTokens });
    // Direct calls ask for what the gateway asks upstream (token ids, logprobs): the upstream does
    // the same work on both paths, so the difference is the gateway's own.
    const directUrl = `${fake.url}/chat/completions`;
    const targets: Target[] = [
      { name: "direct", send: (_p, i) => post(directUrl, { ...clientBody(i), return_token_ids: true, logprobs: true }) },
      {
        name: "gateway, memory sink",
        send: (p, i) => {
          sent.memory++;
          return post(`${memUrl}/p/${p}/v1/chat/completions`, clientBody(i));
        },
      },
      {
        name: "gateway, SQLite store",
        send: (p, i) => {
          sent.sqlite++;
          return post(`${sqlUrl}/p/${p}/v1/chat/completions`, clientBody(i));
        },
      },
    ];

    // (a) Latency: sequential requests, interleaved across the paths so drift (other load on the
    // machine, JIT, GC) hits all of them alike.
    opts.log(`gateway: latency warm-up, ${sizes.warmup} requests per path`);
    for (let i = 0; i < sizes.warmup; i++) for (const t of targets) await t.send("latency", i);
    opts.log(`gateway: latency, ${sizes.latencyRequests} sequential requests per path`);
    const samples = targets.map(() => [] as number[]);
    for (let i = 0; i < sizes.latencyRequests; i++) {
      for (const [k, t] of targets.entries()) {
        const t0 = performance.now();
        await t.send("latency", i);
        samples[k]?.push(performance.now() - t0);
      }
    }
    const stats = samples.map((s) => {
      const sorted = [...s].sort((a, b) => a - b);
      return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean: mean(s) };
    });
    const base = stats[0] as { p50: number; p99: number; mean: number };
    const added = (k: number): number => (stats[k]?.p50 ?? NaN) - base.p50;
    const sqliteAddedP50Ratio = added(2) / added(1);
    const verdict = sqliteAddedP50Ratio <= SQLITE_ADDED_P50_TARGET ? "within" : "OVER";
    const latency: BenchTable = {
      title: "(a) gateway latency: sequential chat completions, direct vs through the gateway",
      columns: ["path", "requests", "p50 ms", "p99 ms", "mean ms", "added p50 ms", "added p99 ms", "p50 ratio", "p99 ratio"],
      rows: targets.map((t, k) => {
        const s = stats[k] as typeof base;
        return [t.name, sizes.latencyRequests, s.p50, s.p99, s.mean, s.p50 - base.p50, s.p99 - base.p99, s.p50 / base.p50, s.p99 / base.p99];
      }),
      notes: [
        `loopback (127.0.0.1), fake vLLM upstream, max_tokens ${sizes.maxTokens}, keep-alive fetch; ${sizes.warmup} warm-up requests per path`,
        "added = gateway − direct; ratio = gateway / direct (direct row: 0 and 1)",
        "direct requests carry the upstream body the gateway sends (return_token_ids, logprobs)",
        `SQLite store added p50 / memory sink added p50 = ${sqliteAddedP50Ratio.toFixed(2)} (target <= ${SQLITE_ADDED_P50_TARGET}: ${verdict})`,
        "the gateway answers once a call's write is queued; the store commits it (fsync) in its writer thread, in batches gathered over 2 ms, and a program ends only after its calls are durable",
      ],
    };

    // (b) Throughput: a fixed number of requests from C concurrent clients (one program each).
    const rps: number[] = [];
    for (const t of targets) {
      opts.log(`gateway: throughput '${t.name}', ${sizes.throughputRequests} requests from ${sizes.concurrency} clients`);
      await runClients(t, Math.min(sizes.warmup * 2, sizes.throughputRequests), sizes.concurrency, (c) => clientIds[c] as string);
      const t0 = performance.now();
      await runClients(t, sizes.throughputRequests, sizes.concurrency, (c) => clientIds[c] as string);
      rps.push((sizes.throughputRequests * 1000) / (performance.now() - t0));
    }
    const direct = rps[0] as number;
    const throughput: BenchTable = {
      title: `(b) gateway throughput: max requests/s with ${sizes.concurrency} concurrent clients`,
      columns: ["path", "clients", "requests", "req/s", "ratio"],
      rows: targets.map((t, k) => [t.name, sizes.concurrency, sizes.throughputRequests, rps[k] as number, (rps[k] as number) / direct]),
      notes: [
        "ratio = path req/s / direct req/s",
        "clients, gateway and upstream share one Node process: the ratio reflects the gateway's CPU cost per request",
      ],
    };

    // Closing the gateways waits for every queued write: what was sent is now durable, or the count says otherwise.
    for (const g of gateways.splice(0)) await g.close();
    const recorded = { memory: memory.calls.length, sqlite: (await store.stats(runId)).calls };
    if (recorded.memory !== sent.memory || recorded.sqlite !== sent.sqlite) {
      throw new ArborError(
        `gateway bench: calls recorded ≠ requests sent (memory ${recorded.memory}/${sent.memory}, sqlite ${recorded.sqlite}/${sent.sqlite})`,
      );
    }
    return { tables: [latency, throughput], sent, recorded, urls, sqliteAddedP50Ratio };
  } finally {
    for (const g of gateways) await g.close();
    await fake?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The gateway benchmark. */
export const gatewayBench: Benchmark = {
  name: "gateway",
  description: "gateway overhead: added latency p50/p99 and max requests/s vs direct calls to a fast upstream",
  async run(opts) {
    return (await runGatewayBench(opts)).tables;
  },
};
