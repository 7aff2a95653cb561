// The networked trajectory store on Postgres (`pg`): many processes and hosts share one schema.
// Tables are versioned by postgres-migrations.ts; token ids and logprobs are bytea through the same
// codec as SQLite (bit-exact); writes are batched through postgres-write-queue.ts; a program's calls are
// stored as deltas over its previous one, as SQLite stores them (postgres-call-rows.ts). A write retried
// with identical content (a call, a program, an end, a reward whose acknowledgement was lost) is
// a no-op; the same id with other content is an error naming it. Runs whose owner is gone are
// ended on open: a process on this host by its pid (run-owner.ts), one elsewhere by its heartbeat.
import { hostname } from "node:os";
import pg from "pg";
import type { Pool, PoolClient } from "pg";
import { ArborError } from "../core/errors.js";
import type { Clock, Timer } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";
import type { Call, ContextAction, ContextEvent, Group, Program, Reward, Termination, TerminationKind, ToolEvent, Trajectory } from "../core/types.js";
import { CallContexts } from "./call-contexts.mjs";
import { resolveByProgram, resolveCalls, type DeltaCallRow } from "./call-delta.js";
import { callWrite, INSERT_CALL, recordedAs } from "./postgres-call-rows.js";
import { migratePostgres, SCHEMA_NAME } from "./postgres-migrations.js";
import { insertProgram, requireRun } from "./postgres-program-insert.js";
import { insertForActive, programRowInsert, requireActive } from "./postgres-program-rows.js";
import { requireFinite, requireIndex, requireIteration, requireString } from "./value-checks.js";
import {
  contextEventFromRow,
  groupFromRow,
  programFromRow,
  rewardFromRow,
  runFromRow,
  toolFromRow,
  type ContextEventRow,
  type GroupRow,
  type ProgramRow,
  type RewardRow,
  type RunRow,
  type ToolRow,
} from "./store-rows.js";
import { connectionLost, connectUntil, FIRST_BACKOFF_MS, messageOf, PgWriteQueue, Refused, type PgWriteQueueOptions } from "./postgres-write-queue.js";
import { PG_TEXT_TYPES, pgText } from "./pg-text.js";
import { currentOwner, ownerAlive } from "./run-owner.js";
import { TERMINATION_KINDS, type NewRun, type Recovered, type RunRecord, type RunStats, type TrajectoryStore } from "./trajectory-store.js";

export interface PostgresStoreOptions extends PgWriteQueueOptions {
  /** Connection URL, e.g. `postgres://postgres@127.0.0.1:5432/test`. */
  url: string;
  /** Schema holding the store's tables (created if absent; default `arbor`). Lower-case letters, digits, `_`. */
  schema?: string;
  /** Connections at most (default 4; the writer uses one at a time, reads the others). */
  poolSize?: number;
  /** Server-side limit of one statement, ms (default 30000). */
  statementTimeoutMs?: number;
  /** Limit on connecting, and on waiting for a free pooled connection, ms (default 10000). */
  connectTimeoutMs?: number;
  /**
   * A run owned by a process on another host is taken for dead (and ended on open) once its
   * heartbeat is this old, ms (default 300000). Its owner refreshes it every quarter of this.
   */
  ownerTimeoutMs?: number;
  /** End time of runs and programs ended on open, and the heartbeat timer (default: the wall clock). */
  clock?: Clock;
}

/** Postgres store options with the defaults filled in. */
export interface ResolvedPostgresOptions {
  url: string;
  schema: string;
  poolSize: number;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
  ownerTimeoutMs: number;
  reconnectMs: number;
}

const CONTEXT_ACTIONS: readonly ContextAction[] = ["discard", "clear-thinking", "summarize"];

function intIn(v: unknown, field: string, lo: number, hi: number, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < lo || v > hi) {
    throw new ArborError(`${field}: must be an integer in [${lo}, ${hi}], got ${String(v)}`, "config");
  }
  return v;
}

/**
 * Check a Postgres store's options, naming a bad field as `${prefix}${field}` (the registry passes
 * `store.`), and fill in the defaults. Throws an {@link ArborError} with code `config`.
 */
export function checkPostgresOptions(opts: Partial<PostgresStoreOptions>, prefix = ""): ResolvedPostgresOptions {
  const url = opts.url;
  if (typeof url !== "string" || !/^postgres(ql)?:\/\//.test(url)) {
    throw new ArborError(`${prefix}url: must be a postgres:// or postgresql:// URL, got ${JSON.stringify(url)}`, "config");
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ArborError(`${prefix}url: not a valid URL: ${safeUrl(url)}`, "config");
  }
  // The store sets the connection's search_path (its schema) through `options`; one in the URL would replace it.
  if (parsed.searchParams.has("options")) {
    throw new ArborError(`${prefix}url: the 'options' parameter is not supported (the store sets search_path itself); use schema and statementTimeoutMs`, "config");
  }
  const schema = opts.schema ?? "arbor";
  if (typeof schema !== "string" || !SCHEMA_NAME.test(schema)) {
    throw new ArborError(`${prefix}schema: must be lower-case letters, digits and '_' (at most 63), got ${JSON.stringify(schema)}`, "config");
  }
  return {
    url,
    schema,
    poolSize: intIn(opts.poolSize, `${prefix}poolSize`, 1, 256, 4),
    statementTimeoutMs: intIn(opts.statementTimeoutMs, `${prefix}statementTimeoutMs`, 1, 86_400_000, 30_000),
    connectTimeoutMs: intIn(opts.connectTimeoutMs, `${prefix}connectTimeoutMs`, 1, 600_000, 10_000),
    ownerTimeoutMs: intIn(opts.ownerTimeoutMs, `${prefix}ownerTimeoutMs`, 1_000, 86_400_000, 300_000),
    reconnectMs: intIn(opts.reconnectMs, `${prefix}reconnectMs`, 0, 86_400_000, 30_000),
  };
}

/** The URL with any password masked, for messages. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ":***@");
  }
}

/** A group inserted in one statement when its run ($2) exists. */
const INSERT_GROUP = `INSERT INTO groups (id, run_id, task_id, program_ids, iteration, held_out_version, attempt)
  SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $2) ON CONFLICT (id) DO NOTHING RETURNING id`;

/** A reward ($1 the program, $2 total, $3 components) inserted in one statement when its program has ended. */
const INSERT_REWARD = `INSERT INTO rewards (program_id, total, components)
  SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM programs WHERE id = $1 AND termination_kind IS NOT NULL FOR SHARE)
  ON CONFLICT (program_id) DO NOTHING RETURNING 1`;

const INSERT_TOOL = programRowInsert("tools", ["program_id", "call_index", "tool", "input", "output", "ok", "duration_ms"]);
const INSERT_CONTEXT_EVENT = programRowInsert("context_events", [
  "program_id",
  "call_index",
  "policy",
  "action",
  "tokens_before",
  "tokens_after",
  "messages_before",
  "messages_after",
  "detail",
]);

interface OwnerRow {
  id: string;
  host: string | null;
  boot_id: string | null;
  pid: number | null;
  pid_start: number | null;
  silent_ms: number | null;
}

/**
 * End every unfinished run whose owner is gone, and its active programs as `aborted`. An owner on
 * this host is gone when its process is (run-owner.ts, as SQLite); one on another host cannot be
 * checked, so it is gone once its heartbeat is older than `ownerTimeoutMs` (database time, so the
 * hosts' clocks need not agree).
 */
async function recover(c: PoolClient, now: number, ownerTimeoutMs: number): Promise<Recovered> {
  const recovered: Recovered = { runs: [], programs: [] };
  await c.query("BEGIN");
  try {
    // NO KEY UPDATE: does not block live writers inserting rows that reference these runs.
    const open = await c.query<OwnerRow>(
      `SELECT r.id, o.host, o.boot_id, o.pid, o.pid_start::float8 AS pid_start,
              (EXTRACT(EPOCH FROM now() - o.heartbeat_at) * 1000)::float8 AS silent_ms
       FROM runs r LEFT JOIN run_owners o ON o.run_id = r.id
       WHERE r.ended_at IS NULL ORDER BY r.seq FOR NO KEY UPDATE OF r`,
    );
    const here = hostname();
    for (const r of open.rows) {
      const owner = r.host === null ? undefined : { host: r.host, bootId: r.boot_id ?? "", pid: r.pid ?? -1, pidStart: r.pid_start ?? -1 };
      let who: string;
      if (!owner) who = "no process is recorded as running it";
      else if (owner.host === here) {
        if (ownerAlive(owner)) continue;
        who = `its process (pid ${owner.pid} on ${owner.host}) is gone`;
      } else {
        const silent = r.silent_ms ?? Infinity;
        if (silent <= ownerTimeoutMs) continue;
        who = `its process (pid ${owner.pid} on ${owner.host}) sent no heartbeat for ${Math.round(silent / 1000)} s (ownerTimeoutMs ${ownerTimeoutMs})`;
      }
      const detail = `run '${r.id}' ended without finishing: ${who}; ended when the store was next opened`;
      const programs = await c.query<{ id: string }>("SELECT id FROM programs WHERE run_id = $1 AND termination_kind IS NULL ORDER BY seq", [r.id]);
      await c.query(
        `UPDATE programs SET state = 'terminated', ended_at = $1, termination_kind = 'aborted', termination_detail = $2
         WHERE run_id = $3 AND termination_kind IS NULL`,
        [now, detail, r.id],
      );
      await c.query("UPDATE runs SET ended_at = $1 WHERE id = $2", [now, r.id]);
      recovered.runs.push(r.id);
      recovered.programs.push(...programs.rows.map((p) => p.id));
    }
    await c.query("COMMIT");
    return recovered;
  } catch (e) {
    await c.query("ROLLBACK").catch(() => undefined);
    throw e;
  }
}

/**
 * A {@link TrajectoryStore} in one schema of a Postgres database, shared by any number of store
 * objects in any number of processes. Opened with the asynchronous {@link PostgresTrajectoryStore.open}
 * (connect, migrate, recover), so `recovered` is known before the store is handed out. Writes of
 * one store object commit in order, in batches; a read waits for the writes its store object
 * queued before it and runs in one repeatable-read snapshot.
 */
export class PostgresTrajectoryStore implements TrajectoryStore {
  private readonly writes: PgWriteQueue;
  private readonly clock: Clock;
  /** Unfinished runs this store object created: their heartbeat says their owner lives. */
  private readonly owned = new Set<string>();
  private heartbeat: Timer | undefined;
  /** Each program's last call this store committed, bounded: its next call is stored as the delta over it. */
  private readonly contexts = new CallContexts();
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly pool: Pool,
    /** Names the store in every error: the URL (password masked) and the schema. */
    readonly label: string,
    readonly recovered: Recovered,
    private readonly resolved: ResolvedPostgresOptions,
    options: PostgresStoreOptions,
  ) {
    this.clock = options.clock ?? realClock;
    this.writes = new PgWriteQueue(pool, label, { ...options, reconnectMs: resolved.reconnectMs, clock: this.clock });
  }

  /**
   * Connect to `url`, create or migrate `schema`, end the runs whose owner is gone (see
   * {@link PostgresStoreOptions.ownerTimeoutMs}) and hand out the store. Rejects with an
   * {@link ArborError} naming the URL when the server cannot be reached, the schema is not an
   * Arbor store or is newer than this build.
   */
  static async open(options: PostgresStoreOptions): Promise<PostgresTrajectoryStore> {
    const o = checkPostgresOptions(options);
    const label = `postgres store ${safeUrl(o.url)} (schema ${o.schema})`;
    const pool = new pg.Pool({
      connectionString: o.url,
      max: o.poolSize,
      connectionTimeoutMillis: o.connectTimeoutMs,
      statement_timeout: o.statementTimeoutMs,
      // A client-side bound too, for a server or network that stops answering altogether.
      query_timeout: o.statementTimeoutMs + o.connectTimeoutMs,
      options: `-c search_path=${o.schema}`,
      application_name: `arbor:${o.schema}`,
      // Text columns come back as written: NUL-bearing strings are stored escaped (pg-text.ts).
      types: PG_TEXT_TYPES,
    });
    // An idle connection the server dropped: the pool discards it and the next checkout reconnects.
    pool.on("error", () => undefined);
    // A checked-out connection the server drops also emits "error" (after the failed query has
    // rejected): without a listener that would end the process instead of failing one batch.
    pool.on("connect", (client) => client.on("error", () => undefined));
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (e) {
      await pool.end().catch(() => undefined);
      throw new ArborError(`${label}: cannot connect: ${messageOf(e)}`, "store_unreachable");
    }
    let recovered: Recovered;
    try {
      await migratePostgres(client, o.schema);
      recovered = await recover(client, (options.clock ?? realClock).now(), o.ownerTimeoutMs);
    } catch (e) {
      client.release();
      await pool.end().catch(() => undefined);
      throw new ArborError(`${label}: cannot open: ${messageOf(e)}`, e instanceof ArborError ? e.code : "store");
    }
    client.release();
    return new PostgresTrajectoryStore(pool, label, recovered, o, options);
  }

  private fail(message: string): never {
    throw new ArborError(`${this.label}: ${message}`, "store");
  }

  private write(op: string, fn: (c: PoolClient) => Promise<void>): Promise<void> {
    if (this.closing) return Promise.reject(new ArborError(`${this.label} is closed`, "store"));
    return this.writes.write(op, fn);
  }

  /**
   * Run `fn` in a read-only repeatable-read snapshot, once the writes queued before it have
   * settled. A read whose connection was lost (a server restart, a network cut) is run again on a
   * fresh one, twice at most; reaching the server again is tried for up to reconnectMs.
   */
  private async read<T>(op: string, fn: (c: PoolClient) => Promise<T>): Promise<T> {
    if (this.closing) this.fail("is closed");
    await this.writes.settled();
    let lostAt: number | undefined;
    for (let attempt = 1; ; attempt++) {
      if (this.closing) this.fail("is closed");
      let c: PoolClient;
      try {
        c = await connectUntil(this.pool, this.clock, (lostAt ?? this.clock.now()) + this.resolved.reconnectMs);
      } catch (e) {
        this.fail(`${op}: ${messageOf(e)}`);
      }
      let begun = false;
      try {
        await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        begun = true;
        const out = await fn(c);
        await c.query("COMMIT");
        c.release();
        return out;
      } catch (e) {
        const ok = await c.query("ROLLBACK").then(
          () => true,
          () => false,
        );
        c.release(ok ? undefined : (e as Error));
        if (e instanceof Refused) this.fail(e.message);
        if (connectionLost(e)) lostAt ??= this.clock.now();
        if (connectionLost(e) && !begun && this.clock.now() < (lostAt ?? 0) + this.resolved.reconnectMs) {
          // A pooled connection that died idle (the cut killed it): not an attempt of the read.
          attempt--;
          await this.clock.sleep(FIRST_BACKOFF_MS);
          continue;
        }
        if (connectionLost(e) && attempt < 3) continue;
        this.fail(`${op}: ${messageOf(e)}`);
      }
    }
  }

  /** Keep the owned runs' heartbeat fresh while there are any (see {@link PostgresStoreOptions.ownerTimeoutMs}). */
  private beat(): void {
    if (this.heartbeat || this.closing || this.owned.size === 0) return;
    this.heartbeat = this.clock.setTimer(this.resolved.ownerTimeoutMs / 4, () => {
      this.heartbeat = undefined;
      if (this.closing || this.owned.size === 0) return;
      // A missed beat is not an error of any caller's write: the next one retries, and only a
      // silence longer than ownerTimeoutMs lets another host end the run.
      void this.pool
        .query("UPDATE run_owners SET heartbeat_at = now() WHERE run_id = ANY($1)", [[...this.owned]])
        .catch(() => undefined)
        .finally(() => this.beat());
    });
  }

  async createRun(run: NewRun): Promise<void> {
    requireString(run.id, "run.id");
    requireString(run.name, "run.name");
    if (typeof run.configJson !== "string") throw new ArborError("run.configJson: must be a string", "store");
    requireFinite(run.startedAt, "run.startedAt");
    const owner = currentOwner();
    await this.write(`createRun '${run.id}'`, async (c) => {
      const r = await c.query("INSERT INTO runs (id, name, config_json, started_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING RETURNING id", [
        run.id,
        run.name,
        run.configJson,
        run.startedAt,
      ]);
      if (r.rowCount === 0) throw new Refused(`createRun: run '${run.id}' already exists`);
      await c.query("INSERT INTO run_owners (run_id, host, boot_id, pid, pid_start) VALUES ($1, $2, $3, $4, $5)", [
        run.id,
        owner.host,
        owner.bootId,
        owner.pid,
        owner.pidStart,
      ]);
    });
    this.owned.add(run.id);
    this.beat();
  }

  async finishRun(id: string, endedAt: number): Promise<void> {
    requireFinite(endedAt, "endedAt");
    await this.write(`finishRun '${id}'`, async (c) => {
      const r = await c.query("UPDATE runs SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL RETURNING id", [endedAt, id]);
      if (r.rowCount !== 0) return;
      await requireRun(c, id, "finishRun");
      throw new Refused(`finishRun: run '${id}' already finished`);
    });
    this.owned.delete(id);
  }

  async reopenRun(id: string): Promise<void> {
    const owner = currentOwner();
    await this.write(`reopenRun '${id}'`, async (c) => {
      const r = await c.query("UPDATE runs SET ended_at = NULL WHERE id = $1 AND ended_at IS NOT NULL RETURNING id", [id]);
      if (r.rowCount === 0) {
        await requireRun(c, id, "reopenRun");
        // A retry of a reopen whose answer was lost finds the run open and owned by this process: done already.
        const mine = await c.query("SELECT 1 FROM run_owners WHERE run_id = $1 AND host = $2 AND pid = $3 AND pid_start = $4", [id, owner.host, owner.pid, owner.pidStart]);
        if (mine.rowCount !== 0) return;
        throw new Refused(`reopenRun: run '${id}' has not finished (its process may still run it)`);
      }
      await c.query(
        `INSERT INTO run_owners (run_id, host, boot_id, pid, pid_start) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (run_id) DO UPDATE SET host = $2, boot_id = $3, pid = $4, pid_start = $5, heartbeat_at = now()`,
        [id, owner.host, owner.bootId, owner.pid, owner.pidStart],
      );
    });
    this.owned.add(id);
    this.beat();
  }

  getRun(id: string): Promise<RunRecord | undefined> {
    return this.read("getRun", async (c) => {
      const r = (await c.query<RunRow>("SELECT * FROM runs WHERE id = $1", [id])).rows[0];
      return r ? runFromRow(r) : undefined;
    });
  }

  listRuns(): Promise<RunRecord[]> {
    return this.read("listRuns", async (c) => (await c.query<RunRow>("SELECT * FROM runs ORDER BY seq")).rows.map(runFromRow));
  }

  async createGroup(group: Group): Promise<void> {
    requireString(group.id, "group.id");
    requireString(group.taskId, "group.taskId");
    if (!Array.isArray(group.programIds)) throw new ArborError("group.programIds: must be an array", "store");
    if (new Set(group.programIds).size !== group.programIds.length) throw new ArborError(`group '${group.id}': duplicate program ids`, "store");
    requireIteration(group.iteration);
    if (group.heldOutVersion !== undefined) requireIndex(group.heldOutVersion, "group.heldOutVersion");
    if (group.attempt !== undefined) requireIteration(group.attempt, "group.attempt");
    const what = `createGroup '${group.id}'`;
    const values = [group.id, group.runId, group.taskId, JSON.stringify(group.programIds), group.iteration ?? null, group.heldOutVersion ?? null, group.attempt ?? null];
    await this.write(what, async (c) => {
      if ((await c.query(INSERT_GROUP, values)).rowCount !== 0) return;
      // Nothing inserted: refused if the run is unknown; else inserted again (another store may have committed the
      // run after the insert's snapshot was taken), and refused if the group is there already.
      await requireRun(c, group.runId, what);
      if ((await c.query(INSERT_GROUP, values)).rowCount === 0) throw new Refused(`createGroup: group '${group.id}' already exists`);
    });
  }

  async createProgram(program: Program): Promise<void> {
    requireString(program.id, "program.id");
    requireString(program.taskId, "program.taskId");
    requireIndex(program.sampleIndex, "program.sampleIndex");
    requireFinite(program.createdAt, "program.createdAt");
    const what = `createProgram '${program.id}'`;
    await this.write(what, (c) => insertProgram(c, program, what));
  }

  async recordCall(call: Call): Promise<void> {
    const w = callWrite(call, this.contexts.get(call.programId));
    const what = `recordCall '${call.id}'`;
    await this.write(what, async (c) => {
      if ((await c.query(INSERT_CALL, w.stored)).rowCount !== 0) return;
      // Not inserted. A retry of this very call (an acknowledgement lost, another store recording it at the same
      // moment: the insert waited for that store's commit) is done; anything else is refused, saying why.
      const recorded = await recordedAs(c, w);
      if (recorded === "same") return;
      await requireActive(c, call.programId, what);
      if (recorded === "other") throw new Refused(`${what}: duplicate call id (a call with this id and other content is recorded)`);
      throw new Refused(`${what}: program '${call.programId}' already has a call at index ${call.index}`);
    });
    // Committed, inserted or found with this very content: the program's next call is stored over it. Only a
    // committed call is ever a base, so every delta row's base exists and holds what the delta was taken over.
    const kept = this.contexts.get(call.programId);
    if (kept === undefined || kept.index < call.index) this.contexts.set(call.programId, w.context);
  }

  async recordTool(event: ToolEvent): Promise<void> {
    requireIndex(event.callIndex, "tool.callIndex");
    requireString(event.tool, "tool.tool");
    requireFinite(event.durationMs, "tool.durationMs");
    const what = `recordTool '${event.tool}'`;
    await this.write(what, async (c) => {
      await insertForActive(c, INSERT_TOOL, what, [
        event.programId,
        event.callIndex,
        event.tool,
        pgText(event.input),
        pgText(event.output),
        event.ok,
        event.durationMs,
      ]);
    });
  }

  async recordContextEvent(event: ContextEvent): Promise<void> {
    const what = `recordContextEvent '${event?.policy}'`;
    requireIndex(event.callIndex, "contextEvent.callIndex");
    requireString(event.policy, "contextEvent.policy");
    if (!CONTEXT_ACTIONS.includes(event.action)) throw new ArborError(`${what}: unknown action '${String(event.action)}'`, "store");
    for (const f of ["tokensBefore", "tokensAfter", "messagesBefore", "messagesAfter"] as const) requireIndex(event[f], `contextEvent.${f}`);
    await this.write(what, async (c) => {
      await insertForActive(c, INSERT_CONTEXT_EVENT, what, [
        event.programId,
        event.callIndex,
        event.policy,
        event.action,
        event.tokensBefore,
        event.tokensAfter,
        event.messagesBefore,
        event.messagesAfter,
        event.detail === undefined ? null : pgText(event.detail),
      ]);
    });
  }

  async endProgram(programId: string, termination: Termination, endedAt: number): Promise<void> {
    if (!TERMINATION_KINDS.includes(termination?.kind)) {
      throw new ArborError(`endProgram '${programId}': unknown termination kind '${termination?.kind}'`, "store");
    }
    requireFinite(endedAt, "endedAt");
    const detail = termination.detail === undefined ? null : pgText(termination.detail);
    // After the end (and so after every call of the program this store queued before it), its last call is let go.
    const forget = (): void => this.contexts.forget(programId);
    await this.write(`endProgram '${programId}'`, async (c) => {
      const r = await c.query(
        `UPDATE programs SET state = 'terminated', ended_at = $1, termination_kind = $2, termination_detail = $3
         WHERE id = $4 AND termination_kind IS NULL RETURNING id`,
        [endedAt, termination.kind, detail, programId],
      );
      if (r.rowCount !== 0) return;
      const row = (await c.query<ProgramRow>("SELECT * FROM programs WHERE id = $1", [programId])).rows[0];
      if (!row) throw new Refused(`endProgram: unknown program '${programId}'`);
      // The same end again (a retry) is already made; any other end of an ended program is refused.
      if (row.termination_kind === termination.kind && row.termination_detail === (termination.detail ?? null) && row.ended_at === endedAt) return;
      throw new Refused(`endProgram: program '${programId}' already ended (${row.termination_kind})`);
    }).finally(forget);
  }

  async setReward(programId: string, reward: Reward): Promise<void> {
    requireFinite(reward?.total, `reward of '${programId}' total`);
    for (const [name, v] of Object.entries(reward.components ?? {})) requireFinite(v, `reward of '${programId}' component '${name}'`);
    const components = JSON.stringify(reward.components ?? {});
    const values = [programId, reward.total, components];
    await this.write(`setReward '${programId}'`, async (c) => {
      if ((await c.query(INSERT_REWARD, values)).rowCount !== 0) return;
      // Nothing inserted: say why.
      const p = (await c.query<{ termination_kind: string | null }>("SELECT termination_kind FROM programs WHERE id = $1 FOR SHARE", [programId])).rows[0];
      if (!p) throw new Refused(`setReward: unknown program '${programId}'`);
      if (p.termination_kind === null) throw new Refused(`setReward: program '${programId}' has not ended`);
      // Ended, by another store after the insert's snapshot was taken: insert again. Else the reward exists.
      if ((await c.query(INSERT_REWARD, values)).rowCount !== 0) return;
      const same = await c.query("SELECT 1 FROM rewards WHERE program_id = $1 AND total = $2 AND components = $3", values);
      if (same.rowCount === 0) throw new Refused(`setReward: program '${programId}' already has a reward`);
    });
  }

  getTrajectory(programId: string): Promise<Trajectory | undefined> {
    return this.read("getTrajectory", async (c) => {
      const p = (await c.query<ProgramRow>("SELECT * FROM programs WHERE id = $1", [programId])).rows[0];
      if (!p) return undefined;
      const calls = await c.query<DeltaCallRow>("SELECT * FROM calls WHERE program_id = $1 ORDER BY idx", [programId]);
      const tools = await c.query<ToolRow>("SELECT * FROM tools WHERE program_id = $1 ORDER BY seq", [programId]);
      const reward = (await c.query<RewardRow>("SELECT * FROM rewards WHERE program_id = $1", [programId])).rows[0];
      const events = await c.query<ContextEventRow>("SELECT * FROM context_events WHERE program_id = $1 ORDER BY seq", [programId]);
      const t: Trajectory = { program: programFromRow(p), calls: resolveCalls(calls.rows), tools: tools.rows.map(toolFromRow) };
      if (reward) t.reward = rewardFromRow(reward);
      if (events.rows.length > 0) t.contextEvents = events.rows.map(contextEventFromRow);
      return t;
    });
  }

  listTrajectories(runId: string): Promise<Trajectory[]> {
    return this.read("listTrajectories", async (c) => {
      await requireRun(c, runId, "listTrajectories");
      const programs = await c.query<ProgramRow>("SELECT * FROM programs WHERE run_id = $1 ORDER BY seq", [runId]);
      const byId = new Map<string, Trajectory>();
      for (const p of programs.rows) byId.set(p.id, { program: programFromRow(p), calls: [], tools: [] });
      const join = "JOIN programs p ON p.id = x.program_id WHERE p.run_id = $1";
      const calls = await c.query<DeltaCallRow>(`SELECT x.* FROM calls x ${join} ORDER BY x.program_id, x.idx`, [runId]);
      resolveByProgram(calls.rows, (programId, resolved) => byId.get(programId)?.calls.push(...resolved));
      for (const r of (await c.query<ToolRow>(`SELECT x.* FROM tools x ${join} ORDER BY x.seq`, [runId])).rows) {
        byId.get(r.program_id)?.tools.push(toolFromRow(r));
      }
      for (const r of (await c.query<ContextEventRow>(`SELECT x.* FROM context_events x ${join} ORDER BY x.seq`, [runId])).rows) {
        const t = byId.get(r.program_id);
        if (t) (t.contextEvents ??= []).push(contextEventFromRow(r));
      }
      for (const r of (await c.query<RewardRow>(`SELECT x.* FROM rewards x ${join}`, [runId])).rows) {
        const t = byId.get(r.program_id);
        if (t) t.reward = rewardFromRow(r);
      }
      return [...byId.values()];
    });
  }

  listGroups(runId: string): Promise<Group[]> {
    return this.read("listGroups", async (c) => {
      await requireRun(c, runId, "listGroups");
      return (await c.query<GroupRow>("SELECT * FROM groups WHERE run_id = $1 ORDER BY seq", [runId])).rows.map(groupFromRow);
    });
  }

  activePrograms(runId: string): Promise<{ id: string; calls: number }[]> {
    return this.read("activePrograms", async (c) => {
      await requireRun(c, runId, "activePrograms");
      const rows = await c.query<{ id: string; calls: number }>(
        `SELECT p.id, (SELECT count(*) FROM calls x WHERE x.program_id = p.id)::int AS calls
         FROM programs p WHERE p.run_id = $1 AND p.termination_kind IS NULL ORDER BY p.seq`,
        [runId],
      );
      return rows.rows;
    });
  }

  stats(runId: string): Promise<RunStats> {
    return this.read("stats", async (c) => {
      await requireRun(c, runId, "stats");
      const progs = (
        await c.query<{ n: number; open: number }>(
          "SELECT count(*)::int AS n, count(*) FILTER (WHERE termination_kind IS NULL)::int AS open FROM programs WHERE run_id = $1",
          [runId],
        )
      ).rows[0] as { n: number; open: number };
      const calls = (
        await c.query<{ n: number; prompt: number; output: number }>(
          `SELECT count(*)::int AS n, (coalesce(sum(x.prompt_shared + octet_length(x.prompt_token_ids) / 4), 0))::float8 AS prompt,
                  (coalesce(sum(octet_length(x.output_token_ids)), 0) / 4)::float8 AS output
           FROM calls x JOIN programs p ON p.id = x.program_id WHERE p.run_id = $1`,
          [runId],
        )
      ).rows[0] as { n: number; prompt: number; output: number };
      const terminations = Object.fromEntries(TERMINATION_KINDS.map((k) => [k, 0])) as Record<TerminationKind, number>;
      const kinds = await c.query<{ kind: TerminationKind; n: number }>(
        "SELECT termination_kind AS kind, count(*)::int AS n FROM programs WHERE run_id = $1 AND termination_kind IS NOT NULL GROUP BY termination_kind",
        [runId],
      );
      for (const k of kinds.rows) terminations[k.kind] = k.n;
      const rewards = (
        await c.query<{ n: number; mean: number | null }>(
          "SELECT count(*)::int AS n, avg(x.total)::float8 AS mean FROM rewards x JOIN programs p ON p.id = x.program_id WHERE p.run_id = $1",
          [runId],
        )
      ).rows[0] as { n: number; mean: number | null };
      return {
        programs: progs.n,
        unfinished: progs.open,
        calls: calls.n,
        promptTokens: calls.prompt,
        outputTokens: calls.output,
        terminations,
        rewarded: rewards.n,
        meanReward: rewards.n > 0 ? rewards.mean : null,
      };
    });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.heartbeat?.cancel();
      this.heartbeat = undefined;
      try {
        await this.writes.settled();
      } finally {
        this.contexts.clear();
        await this.pool.end();
      }
    })();
    return this.closing;
  }
}
