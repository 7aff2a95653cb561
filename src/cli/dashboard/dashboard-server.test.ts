// The dashboard's JSON/SSE API over a run fixture: a real SQLite store (testing/inspect-store.ts, plus a live
// run with an active program and a hygiene violation), the run's metrics.jsonl and a validation report, and
// a gateway and engines served over HTTP with their /programs, /metrics and /health pages (an unreachable engine too).
import { createServer, get, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { createSandboxPool, type SandboxPool } from "../../sandbox/pool.js";
import type { ExecResult, Sandbox, SandboxProvider } from "../../sandbox/sandbox.js";
import { SqliteTrajectoryStore } from "../../store/sqlite-store.js";
import { fixtureGroup, fixtureProgram, fixtureRun } from "../../testing/store-fixtures.js";
import { writeInspectStore } from "../../testing/inspect-store.js";
import type { TrajectoryView } from "../inspect.js";
import { createDashboardServer, type DashboardServer } from "./dashboard-server.js";
import type { CurvePoint, EngineRow, GatewayRow, HeldOutPoint, Highlight, Overview, ProgramsPage, SandboxPoolRow } from "./dashboard-types.js";
import { RunSource } from "./run-source.js";

const ADMIN = "admin-token-0123456789";
const NOW = 1_000_000;
let dir: string;
let store: SqliteTrajectoryStore;
let servers: Server[] = [];
let dash: DashboardServer;
const clock = new VirtualClock(NOW);
// The run's sandbox pool, its metrics in the registry the gateway's /metrics page serves (as run-deployment.ts wires it).
const poolRegistry = new Registry();
let pool: SandboxPool;

/** Sandboxes in memory, created at once. */
const memoryProvider: SandboxProvider = {
  name: "memory",
  create: async (programId: string): Promise<Sandbox> => ({
    programId,
    hostWorkspace: `/mem/${programId}`,
    exec: async (): Promise<ExecResult> => ({ exitCode: 0, signal: null, stdout: "", stderr: "", timedOut: false, durationMs: 0 }),
    writeFile: async () => {},
    destroy: async () => {},
  }),
  destroyAll: async () => {},
};

function serve(pages: Record<string, (auth: string | undefined) => { status: number; body: string }>): Promise<string> {
  const s = createServer((req, res) => {
    const page = pages[req.url ?? ""];
    const r = page ? page(req.headers.authorization) : { status: 404, body: "" };
    res.writeHead(r.status).end(r.body);
  });
  servers.push(s);
  return new Promise((done) => s.listen(0, "127.0.0.1", () => done(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-dashboard-"));
  await writeInspectStore(join(dir, "store.sqlite"));
  store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
  // A live run: one program still active (the gateway holds it), one ended for a hygiene violation.
  await store.createRun({ ...fixtureRun("run-3"), configJson: JSON.stringify({ model: { vocab: "arbor" } }) });
  const g = fixtureGroup("g4", "run-3", 2, "swe-1");
  await store.createGroup(g);
  await store.createProgram(fixtureProgram(g, 0));
  await store.createProgram(fixtureProgram(g, 1));
  await store.endProgram("g4-p1", { kind: "hygiene_violation", detail: "read tests/test_hidden.py" }, 2000);
  writeFileSync(
    join(dir, "metrics.jsonl"),
    [
      { kind: "held-out", index: 0, time: 1, heldOut: { version: 0, solved: 0.25, solvedSe: 0.05, tasks: 4, samples: 1 } },
      { kind: "iteration", index: 1, runId: "run-1", policyVersion: 0, meanReward: 0.25, meanOutputTokens: 12, loss: 0.5, gradNorm: 1, kl: null },
      { kind: "iteration", index: 2, runId: "run-2", policyVersion: 1, meanReward: 0.5, meanOutputTokens: 10, loss: 0.25, gradNorm: 0.5, kl: 0.01, entropy: 1.25, heldOut: { version: 2, solved: 0.5, solvedSe: null } },
    ]
      .map((x) => JSON.stringify(x))
      .join("\n") + '\n{"kind":"iteration","ind',
  );
  writeFileSync(join(dir, "report.json"), JSON.stringify({ tasks: [{ id: "calc-1", kept: true, reasons: [] }, { id: "calc-2", kept: false, reasons: ["golden-fails", "judge-rejects"] }] }));
  // Two programs took sandboxes (one whose preparation was in flight, one on demand), one gave it back; one more is prepared ahead.
  pool = createSandboxPool({ provider: memoryProvider, clock, warmSize: 2, registry: poolRegistry });
  pool.prepare(["g4-p0"]);
  await pool.acquire("g4-p0");
  await pool.acquire("g4-p1");
  await pool.reclaim("g4-p1");
  pool.prepare(["g5-p0"]);
  await new Promise((r) => setImmediate(r));
  const poolPage = await poolRegistry.metrics();
  const gateway = await serve({
    "/programs": (auth) =>
      auth === `Bearer ${ADMIN}`
        ? { status: 200, body: JSON.stringify({ programs: [{ id: "g4-p0", state: "active", calls: 3, inFlight: 1, contextTokens: 77, backend: "engine-0", phase: "reasoning", openedAt: NOW - 300_000, lastActivity: NOW - 200_000 }] }) }
        : { status: 401, body: "{}" },
    "/metrics": () => ({ status: 200, body: 'arbor_gateway_programs{state="active"} 1\narbor_gateway_programs{state="terminated"} 4\narbor_gateway_pauses_total 3\narbor_gateway_restores_total 2\narbor_gateway_held_calls 0\narbor_gateway_inflight_requests{backend="engine-0"} 1\n' + poolPage }),
  });
  const engine = await serve({
    "/metrics": () => ({ status: 200, body: '# HELP x\nvllm:num_requests_running{model_name="m"} 2\nvllm:num_requests_waiting{model_name="m"} 5\nvllm:kv_cache_usage_perc{model_name="m"} 0.375\nvllm:prefix_cache_queries_total{model_name="m"} 200\nvllm:prefix_cache_hits_total{model_name="m"} 150\nvllm:num_preemptions_total{model_name="m"} 7\n' }),
    "/health": () => ({ status: 200, body: JSON.stringify({ status: "ok", policy_version: 4 }) }),
  });
  // A port nothing listens on any more: the engine is unreachable.
  const gone = await serve({});
  await new Promise((done) => (servers.pop() as Server).close(done));
  const source = new RunSource({ store, runDir: dir, gatewayUrl: gateway, gatewayAdminToken: ADMIN, engines: [{ name: "engine-0", url: engine }, { name: "engine-1", url: gone }], validationReport: join(dir, "report.json"), stuckMs: 60_000, clock });
  dash = createDashboardServer({ source, clock, webRoot: join(dir, "no-ui") });
  await dash.pollNow();
});

afterAll(async () => {
  await dash.close();
  await pool.close();
  await store.close();
  for (const s of servers) await new Promise((done) => s.close(done));
  servers = [];
  rmSync(dir, { recursive: true, force: true });
});

async function api<T>(url: string, status = 200): Promise<T> {
  const r = await dash.app.inject({ method: "GET", url });
  expect(r.statusCode, r.body).toBe(status);
  return r.json() as T;
}

describe("dashboard API", () => {
  it("GET /api/runs lists the store's runs with their stats", async () => {
    const { runs } = await api<{ runs: Overview["runs"] }>("/api/runs");
    expect(runs.map((r) => r.id)).toEqual(["run-1", "run-2", "run-3"]);
    expect(runs[0]).toMatchObject({ env: "calc", stats: { programs: 3, calls: 5 } });
  });

  it("GET /api/programs: every program with the gateway's phase for the live one, counts by state and phase, filters and pages", async () => {
    const all = await api<ProgramsPage>("/api/programs");
    expect(all.total).toBe(6);
    expect(all.counts).toEqual({ terminated: { none: 5 }, active: { reasoning: 1 } });
    const live = all.rows.find((p) => p.id === "g4-p0");
    expect(live).toMatchObject({ runId: "run-3", state: "active", phase: "reasoning", inFlight: 1, contextTokens: 77, backend: "engine-0", calls: 0 });
    expect(all.rows.find((p) => p.id === "g1-p0")).toMatchObject({ phase: null, reward: 1, components: { outcome: 1, format: 1 }, toolCalls: 1 });
    const reasoning = await api<ProgramsPage>("/api/programs?phase=reasoning");
    expect(reasoning.rows.map((p) => p.id)).toEqual(["g4-p0"]);
    const run1 = await api<ProgramsPage>("/api/programs?run=run-1&state=terminated&offset=1&limit=1");
    expect(run1).toMatchObject({ total: 3, offset: 1 });
    expect(run1.rows.map((p) => p.id)).toEqual(["g1-p1"]);
    expect((await api<{ error: string }>("/api/programs?limit=501", 400)).error).toMatch(/^limit: must be an integer in 1\.\.500/);
    expect((await api<{ error: string }>("/api/programs?offset=-1", 400)).error).toMatch(/^offset:/);
  });

  it("GET /api/programs/:id: one trajectory as turns, tokens decoded, tool calls, context events, reward components", async () => {
    const v = await api<TrajectoryView & { live: unknown }>("/api/programs/g1-p1");
    expect(v.program).toMatchObject({ id: "g1-p1", runId: "run-1" });
    expect(v.reward).toEqual({ total: 0.25, components: { outcome: 0.25, format: 1 } });
    expect(v.tokenizer).toEqual({ source: "Arbor's vocabulary (the run's model.vocab)" });
    expect(v.turns).toHaveLength(2);
    expect(v.turns[0]?.outputText).toBe('<|tool_call|>{"name":"calc","arguments":{"expr":"6*7"}}<|/tool_call|><|end|>');
    expect(v.turns[0]?.tools).toMatchObject([{ tool: "calc", input: '{"expr":"6*7"}', output: "42", ok: true }]);
    expect(v.turns[1]).toMatchObject({ contextReset: "history differs", contextEvents: [{ policy: "discard-all", action: "discard", detail: "dropped the history" }] });
    expect(v.live).toMatchObject({ id: "g1-p1", state: "terminated" });
    expect((await api<{ error: string }>("/api/programs/nope", 404)).error).toBe("program 'nope' is not in the store");
  });

  it("GET /api/engines: the engines' /metrics and /health numbers, an unreachable engine unhealthy, the gateway's pauses and restores", async () => {
    const { engines, gateway } = await api<{ engines: EngineRow[]; gateway: GatewayRow }>("/api/engines");
    expect(engines[0]).toEqual({ name: "engine-0", url: expect.any(String), healthy: true, error: null, running: 2, waiting: 5, kvUsage: 0.375, prefixCacheQueries: 200, prefixCacheHits: 150, prefixHitRate: 0.75, preemptions: 7, policyVersion: 4 });
    expect(engines[1]).toMatchObject({ name: "engine-1", healthy: false, running: null });
    expect(engines[1]?.error).toMatch(/^metrics unreadable: /);
    expect(gateway).toMatchObject({ healthy: true, activePrograms: 1, terminatedPrograms: 4, pauses: 3, restores: 2, heldCalls: 0, inflightRequests: 1 });
  });

  it("GET /api/sandbox-pool: the pool's own counters as the gateway's /metrics carries them (warm, idle, in use, created, destroyed)", async () => {
    const { sandboxPool } = await api<{ sandboxPool: SandboxPoolRow }>("/api/sandbox-pool");
    const c = pool.counts();
    expect(c).toMatchObject({ warm: 1, ready: 1, live: 1, created: 3, destroyed: 1 });
    expect(sandboxPool).toEqual({ warm: c.warm, idle: c.ready, inUse: c.live, queued: c.queued, created: c.created, destroyed: c.destroyed, acquired: { in_flight: 1, miss: 1 }, leaks: 0 });
    expect((await api<Overview>("/api/overview")).sandboxPool).toEqual(sandboxPool);
  });

  it("GET /api/curves: one point per iteration of metrics.jsonl (held-out lines and a half-written line skipped), and the held-out scores", async () => {
    const { curves, heldOut } = await api<{ curves: CurvePoint[]; heldOut: HeldOutPoint[] }>("/api/curves");
    expect(heldOut).toEqual([
      { version: 0, solved: 0.25, solvedSe: 0.05 },
      { version: 2, solved: 0.5, solvedSe: null },
    ]);
    expect(curves).toEqual([
      { kind: "iteration", index: 1, runId: "run-1", meanReward: 0.25, meanOutputTokens: 12, loss: 0.5, gradNorm: 1, kl: null, entropy: null, policyVersion: 0 },
      { kind: "iteration", index: 2, runId: "run-2", meanReward: 0.5, meanOutputTokens: 10, loss: 0.25, gradNorm: 0.5, kl: 0.01, entropy: 1.25, policyVersion: 1 },
    ]);
  });

  it("GET /api/highlights: the stuck program, the unhealthy engine, the hygiene violation and the validation drop, each with its reason", async () => {
    const { highlights } = await api<{ highlights: Highlight[] }>("/api/highlights");
    expect(highlights).toContainEqual({ kind: "stuck-program", subject: "g4-p0", reason: "no call activity for 200 s (reasoning, 1 call in flight)" });
    expect(highlights).toContainEqual({ kind: "hygiene-violation", subject: "g4-p1", reason: "read tests/test_hidden.py" });
    expect(highlights).toContainEqual({ kind: "validation-drop", subject: "calc-2", reason: "golden-fails, judge-rejects" });
    expect(highlights.find((h) => h.kind === "unhealthy-engine")?.subject).toBe("engine-1");
    expect(highlights).toHaveLength(4);
  });

  it("GET /api/overview: counts, engines and highlights of the latest poll; the UI answers 503 with the reason when not built", async () => {
    const o = await api<Overview>("/api/overview");
    expect(o).toMatchObject({ mode: "live", programsTotal: 6, programCounts: { active: { reasoning: 1 } } });
    expect(o.seq).toBeGreaterThanOrEqual(1);
    const page = await dash.app.inject({ method: "GET", url: "/" });
    expect(page.statusCode).toBe(503);
    expect(page.body).toMatch(/web UI is not built .*run `npm run build`/);
  });

  it("answers an unknown API path with 404 and the routes there are (not the web UI's page)", async () => {
    const r = await dash.app.inject({ method: "GET", url: "/api/run" });
    expect(r.statusCode).toBe(404);
    expect(r.json<{ error: string }>().error).toBe(
      "no API route GET /api/run; the API: /api/overview, /api/runs, /api/programs, /api/programs/:id, /api/engines, /api/sandbox-pool, /api/curves, /api/highlights, /api/events",
    );
  });

  it("reads the store again only once storeRefreshMs have passed (default 3 s)", async () => {
    const g = fixtureGroup("g5", "run-3", 1, "swe-2");
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    await dash.pollNow();
    expect((await api<ProgramsPage>("/api/programs")).total).toBe(6);
    clock.advance(3_000);
    await dash.pollNow();
    const after = await api<ProgramsPage>("/api/programs?run=run-3");
    expect(after.rows.map((p) => p.id)).toEqual(["g4-p0", "g4-p1", "g5-p0"]);
  });

  it("GET /api/events streams an overview on connect and one per poll", async () => {
    const url = await dash.listen("127.0.0.1", 0);
    const events: { event: string; data: Overview }[] = [];
    let buf = "";
    const req = get(`${url}/api/events`);
    const res = await new Promise<import("node:http").IncomingMessage>((done) => req.on("response", done));
    expect(res.headers["content-type"]).toBe("text/event-stream");
    const got = (n: number): Promise<void> =>
      new Promise((done) => {
        const check = (): void => {
          if (events.length >= n) {
            res.off("data", onData);
            done();
          }
        };
        const onData = (chunk: Buffer): void => {
          buf += chunk.toString();
          let i: number;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const ev = /^event: (.*)$/m.exec(frame)?.[1];
            const data = /^data: (.*)$/m.exec(frame)?.[1];
            if (ev && data) events.push({ event: ev, data: JSON.parse(data) as Overview });
          }
          check();
        };
        res.on("data", onData);
        check();
      });
    await got(1);
    const first = events[0]!.data.seq;
    await dash.pollNow();
    await got(2);
    expect(events.map((e) => e.event)).toEqual(["overview", "overview"]);
    expect(events[1]!.data.seq).toBe(first + 1);
    req.destroy();
  });
});
