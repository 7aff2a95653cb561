// `arbor bench store`: trajectories written and read per second by the embedded SQLite store and
// the networked Postgres store, on the same realistic multi-turn workload (agent programs whose
// context grows to tens of thousands of tokens, each call recorded with its full prompt ids: both stores
// keep each as the delta over the program's previous call), in one run, with the
// Postgres / SQLite ratio. Programs run concurrently as under the gateway; each
// program's calls are recorded one after the other, each awaited (durable before the next turn).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { Rng } from "../core/rng.js";
import type { Call, Group, Program } from "../core/types.js";
import { PostgresTrajectoryStore } from "../store/postgres-store.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import type { Benchmark, BenchOptions, BenchTable } from "./bench.js";

export interface StoreBenchConfig {
  quick: boolean;
  /** Programs of the run (all in flight at once), in groups of `groupSize`. */
  programs: number;
  groupSize: number;
  /** Calls per program. */
  turns: number;
  /** Prompt tokens of the first call. */
  systemTokens: number;
  /** Tokens each later call's prompt adds after the previous output (tool results, user turn). */
  turnTokens: number;
  outputTokens: number;
  /** Postgres server (a throwaway schema is created and dropped); unreachable → its rows say so. */
  postgresUrl: string;
}

/** The workload; `quick` is small enough for tests and smoke runs. */
export function storeBenchConfig(quick: boolean): StoreBenchConfig {
  return {
    quick,
    programs: quick ? 8 : 64,
    groupSize: 8,
    turns: quick ? 4 : 24,
    systemTokens: quick ? 300 : 2000,
    turnTokens: quick ? 200 : 600,
    outputTokens: quick ? 50 : 250,
    postgresUrl: process.env.ARBOR_BENCH_POSTGRES_URL ?? process.env.ARBOR_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  };
}

/** One store's measurements. */
export interface StoreRun {
  store: string;
  trajectories: number;
  calls: number;
  /** Token ids stored (prompt + output of every call). */
  tokens: number;
  writeS: number;
  /** `listTrajectories` of the whole run. */
  listS: number;
  /** `getTrajectory` of every program, all at once. */
  getS: number;
}

/** The calls of one program: each prompt is the previous prompt ‖ previous output ‖ new tokens. */
function programCalls(cfg: StoreBenchConfig, programId: string, rng: Rng): Call[] {
  const tokens = (n: number): number[] => Array.from({ length: n }, () => rng.int(0, 151_935));
  const calls: Call[] = [];
  let prompt = tokens(cfg.systemTokens);
  for (let i = 0; i < cfg.turns; i++) {
    const output = tokens(cfg.outputTokens);
    calls.push({
      id: `${programId}-c${i}`,
      programId,
      index: i,
      messages: [{ role: "user", content: `turn ${i}` }],
      promptTokenIds: prompt,
      outputTokenIds: output,
      logprobs: output.map(() => -rng.float() * 5),
      outputText: `answer ${i}`,
      finishReason: "stop",
      backend: "bench",
      policyVersion: 1,
      timings: { start: i, end: i + 0.5 },
    });
    prompt = [...prompt, ...output, ...tokens(cfg.turnTokens)];
  }
  return calls;
}

/** Write one run of `cfg`'s programs into `store`, programs concurrently, then read it back both ways. */
async function measure(name: string, store: TrajectoryStore, cfg: StoreBenchConfig): Promise<StoreRun> {
  const runId = "bench-run";
  const rng = new Rng(7);
  const groups: Group[] = [];
  const programs: { program: Program; calls: Call[] }[] = [];
  for (let p = 0; p < cfg.programs; p++) {
    const g = Math.floor(p / cfg.groupSize);
    if (!groups[g]) groups[g] = { id: `g${g}`, runId, taskId: `task-${g}`, programIds: [] };
    const id = `g${g}-p${p % cfg.groupSize}`;
    const program: Program = { id, runId, taskId: `task-${g}`, groupId: `g${g}`, sampleIndex: p % cfg.groupSize, state: "active", createdAt: p };
    programs.push({ program, calls: programCalls(cfg, id, rng.fork(id)) });
  }
  const start = performance.now();
  await store.createRun({ id: runId, name: "bench", configJson: "{}", startedAt: 0 });
  for (const g of groups) await store.createGroup(g);
  await Promise.all(
    programs.map(async ({ program, calls }) => {
      await store.createProgram(program);
      for (const c of calls) await store.recordCall(c);
      await store.endProgram(program.id, { kind: "completed" }, 1);
      await store.setReward(program.id, { total: 1, components: { outcome: 1 } });
    }),
  );
  const writeS = (performance.now() - start) / 1000;
  const t1 = performance.now();
  const listed = await store.listTrajectories(runId);
  const listS = (performance.now() - t1) / 1000;
  const t2 = performance.now();
  const got = await Promise.all(programs.map(({ program }) => store.getTrajectory(program.id)));
  const getS = (performance.now() - t2) / 1000;
  // What was read is what was written: a store that dropped or garbled calls would look fast.
  const calls = listed.reduce((n, t) => n + t.calls.length, 0);
  const last = programs.at(-1) as (typeof programs)[number];
  const readBack = got.at(-1)?.calls.at(-1);
  if (listed.length !== cfg.programs || calls !== cfg.programs * cfg.turns || readBack?.promptTokenIds.length !== last.calls.at(-1)?.promptTokenIds.length) {
    throw new Error(`store bench: ${name} read back ${listed.length} trajectories and ${calls} calls, wrote ${cfg.programs} and ${cfg.programs * cfg.turns}`);
  }
  const tokens = programs.reduce((n, p) => n + p.calls.reduce((m, c) => m + c.promptTokenIds.length + c.outputTokenIds.length, 0), 0);
  return { store: name, trajectories: cfg.programs, calls, tokens, writeS, listS, getS };
}

/** The table: one row per store, then the Postgres / SQLite ratios (when both ran). */
export function storeTable(runs: readonly StoreRun[], cfg: StoreBenchConfig, notes: string[] = []): BenchTable {
  const perS = (n: number, s: number): number => n / s;
  const rows: (string | number)[][] = runs.map((r) => [r.store, r.trajectories, r.calls, r.tokens, perS(r.trajectories, r.writeS), perS(r.calls, r.writeS), perS(r.trajectories, r.listS), perS(r.trajectories, r.getS)]);
  const [sqlite, postgres] = [runs.find((r) => r.store === "sqlite"), runs.find((r) => r.store === "postgres")];
  if (sqlite && postgres) {
    rows.push(["postgres / sqlite", "", "", "", sqlite.writeS / postgres.writeS, sqlite.writeS / postgres.writeS, sqlite.listS / postgres.listS, sqlite.getS / postgres.getS]);
  }
  return {
    title: "trajectory store: SQLite (embedded) vs Postgres (networked), same workload",
    columns: ["store", "trajectories", "calls", "tokens", "write traj/s", "write calls/s", "list traj/s", "get traj/s"],
    rows,
    notes: [
      `${cfg.programs} programs in flight, ${cfg.turns} calls each; prompts grow from ${cfg.systemTokens} by ${cfg.outputTokens} output + ${cfg.turnTokens} new tokens a turn (last prompt ${cfg.systemTokens + (cfg.turns - 1) * (cfg.outputTokens + cfg.turnTokens)} tokens); every call is recorded with its full prompt ids (both stores keep each as the delta over the program's previous call)`,
      "write: create, every call awaited in turn, end, reward; list: listTrajectories of the run; get: getTrajectory of every program at once. The ratio row is postgres speed / sqlite speed.",
      "SQLite: a file in the temp dir, synchronous=full. Postgres: a throwaway schema on the server below, default pool.",
      ...notes,
    ],
  };
}

async function withPostgres(url: string, schema: string, fn: () => Promise<StoreRun>): Promise<StoreRun> {
  try {
    return await fn();
  } finally {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
    await client
      .connect()
      .then(() => client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
      .catch(() => undefined)
      .finally(() => client.end().catch(() => undefined));
  }
}

/** Run the store benchmark with `cfg`. */
export async function runStoreBench(cfg: StoreBenchConfig, log: (line: string) => void): Promise<BenchTable[]> {
  const runs: StoreRun[] = [];
  const notes: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), "arbor-store-bench-"));
  try {
    log("sqlite: writing and reading the run");
    const sqlite = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
    try {
      runs.push(await measure("sqlite", sqlite, cfg));
    } finally {
      await sqlite.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const schema = `arbor_bench_${randomBytes(6).toString("hex")}`;
  const where = new URL(cfg.postgresUrl);
  where.password = where.password ? "***" : "";
  log(`postgres: writing and reading the run (${where.toString()}, schema ${schema})`);
  let opened = false;
  try {
    runs.push(
      await withPostgres(cfg.postgresUrl, schema, async () => {
        const store = await PostgresTrajectoryStore.open({ url: cfg.postgresUrl, schema });
        opened = true;
        try {
          return await measure("postgres", store, cfg);
        } finally {
          await store.close();
        }
      }),
    );
  } catch (e) {
    if (opened) throw e;
    // Unreachable server: the SQLite row still stands; the table says why Postgres has none.
    notes.push(`postgres: not measured: ${(e as Error).message}`);
  }
  notes.push(`postgres server: ${where.toString()} (ARBOR_BENCH_POSTGRES_URL)`);
  return [storeTable(runs, cfg, notes)];
}

export const storeBench: Benchmark = {
  name: "store",
  description: "trajectories written and read per second: SQLite vs Postgres, realistic multi-turn trajectories",
  run: (opts: BenchOptions) => runStoreBench(storeBenchConfig(opts.quick), opts.log),
};
