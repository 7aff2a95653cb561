// The embedded trajectory store on SQLite (better-sqlite3): WAL journal, foreign keys, a schema
// version, token ids as Int32 LE blobs and logprobs as float64 LE blobs so nothing is rounded.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { ArborError } from "../core/errors.js";
import type {
  Call,
  ContextAction,
  ContextEvent,
  Group,
  Program,
  Reward,
  Termination,
  TerminationKind,
  ToolEvent,
  Trajectory,
} from "../core/types.js";
import type { Clock } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";
import { currentOwner, ownerAlive } from "./run-owner.js";
import { SqliteWriteQueue, type WriteQueueOptions } from "./sqlite-write-queue.js";
import type { WriteStep } from "./sqlite-writer.mjs";
import { resolveByProgram, resolveCalls, type DeltaCallRow } from "./call-delta.js";
import { encodeFloat64s, encodeTokenIds } from "./codec.js";
import {
  contextEventFromRow,
  groupFromRow,
  programFromRow,
  programRowValues,
  PROGRAM_COLUMNS,
  rewardFromRow,
  runFromRow,
  toolFromRow,
  type ContextEventRow,
  type GroupRow as StoredGroupRow,
  type ProgramRow,
  type RewardRow,
  type RunRow,
  type ToolRow,
} from "./store-rows.js";
import { TERMINATION_KINDS, type NewRun, type Recovered, type RunRecord, type RunStats, type TrajectoryStore } from "./trajectory-store.js";
import { checkCall, encodeTokenVersions, requireFinite, requireIndex, requireIteration, requireString } from "./value-checks.js";

/** Bump when the tables change; an existing file with another version is refused, not migrated silently. */
export const SQLITE_SCHEMA_VERSION = 10;

const V1_TO_V2 = `
ALTER TABLE calls ADD COLUMN trainable INTEGER NOT NULL DEFAULT 1;
ALTER TABLE calls ADD COLUMN context_reset INTEGER NOT NULL DEFAULT 0;
`;

// Version 3 adds each call's per-token weights versions (Int32 LE; NULL = all at policy_version).
const V2_TO_V3 = `
ALTER TABLE calls ADD COLUMN token_policy_versions BLOB;
`;

// Version 4 adds the model name each call was served as (NULL: the backend names none).
const V3_TO_V4 = `
ALTER TABLE calls ADD COLUMN served_model TEXT;
`;

// Version 5 adds why a call's prompt did not continue the previous context (NULL: no reason known,
// or the call continued it).
const V4_TO_V5 = `
ALTER TABLE calls ADD COLUMN context_reset_reason TEXT;
`;

// Version 6 adds the model name the client asked for and a clamped max_tokens (asked, granted;
// NULL: served as asked).
const V5_TO_V6 = `
ALTER TABLE calls ADD COLUMN requested_model TEXT;
ALTER TABLE calls ADD COLUMN max_tokens_asked INTEGER;
ALTER TABLE calls ADD COLUMN max_tokens_granted INTEGER;
`;

// Version 7 adds the iteration each group was rolled out in: a run has one id and its iterations belong to it
// (NULL: not known, as for every group written before).
const V6_TO_V7 = `
ALTER TABLE groups ADD COLUMN iteration INTEGER;
`;

// Version 8 marks held-out evaluation groups with the policy version they scored: they belong to their run but
// are never trained on (NULL: a training group, as every group written before).
const V7_TO_V8 = `
ALTER TABLE groups ADD COLUMN held_out_version INTEGER;
`;

// A call stored over another call of its program (call-delta.ts): `base_idx` names it (NULL: the row is whole),
// `prompt_shared` counts the leading ids of its prompt then output that this prompt starts with, `messages_shared`
// its leading messages; `prompt_token_ids` and `messages` hold the rest.
const V8_TO_V9 = `
ALTER TABLE calls ADD COLUMN base_idx INTEGER;
ALTER TABLE calls ADD COLUMN prompt_shared INTEGER NOT NULL DEFAULT 0;
ALTER TABLE calls ADD COLUMN messages_shared INTEGER NOT NULL DEFAULT 0;
`;

// Version 10 records which resume of its run rolled a group out (NULL: the run's first process, as for every group
// written before): a resumed run rolls out again the iteration or evaluation a kill cut.
const V9_TO_V10 = `
ALTER TABLE groups ADD COLUMN attempt INTEGER;
`;

const SCHEMA = `
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  config_json TEXT NOT NULL,
  started_at REAL NOT NULL,
  ended_at REAL
);
CREATE TABLE groups (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id),
  task_id TEXT NOT NULL,
  program_ids TEXT NOT NULL,
  iteration INTEGER,
  held_out_version INTEGER,
  attempt INTEGER
);
CREATE INDEX groups_run ON groups(run_id);
CREATE TABLE programs (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id),
  group_id TEXT NOT NULL REFERENCES groups(id),
  task_id TEXT NOT NULL,
  sample_index INTEGER NOT NULL,
  state TEXT NOT NULL,
  created_at REAL NOT NULL,
  ended_at REAL,
  termination_kind TEXT,
  termination_detail TEXT
);
CREATE INDEX programs_run ON programs(run_id);
CREATE TABLE calls (
  id TEXT PRIMARY KEY,
  program_id TEXT NOT NULL REFERENCES programs(id),
  idx INTEGER NOT NULL,
  messages TEXT NOT NULL,
  prompt_token_ids BLOB NOT NULL,
  output_token_ids BLOB NOT NULL,
  logprobs BLOB NOT NULL,
  output_text TEXT NOT NULL,
  finish_reason TEXT NOT NULL,
  backend TEXT NOT NULL,
  policy_version INTEGER NOT NULL,
  start_ms REAL NOT NULL,
  end_ms REAL NOT NULL,
  trainable INTEGER NOT NULL DEFAULT 1,
  context_reset INTEGER NOT NULL DEFAULT 0,
  token_policy_versions BLOB,
  served_model TEXT,
  context_reset_reason TEXT,
  requested_model TEXT,
  max_tokens_asked INTEGER,
  max_tokens_granted INTEGER,
  base_idx INTEGER,
  prompt_shared INTEGER NOT NULL DEFAULT 0,
  messages_shared INTEGER NOT NULL DEFAULT 0,
  UNIQUE (program_id, idx)
);
CREATE TABLE tools (
  program_id TEXT NOT NULL REFERENCES programs(id),
  call_index INTEGER NOT NULL,
  tool TEXT NOT NULL,
  input TEXT NOT NULL,
  output TEXT NOT NULL,
  ok INTEGER NOT NULL,
  duration_ms REAL NOT NULL
);
CREATE INDEX tools_program ON tools(program_id);
CREATE TABLE rewards (
  program_id TEXT PRIMARY KEY REFERENCES programs(id),
  total REAL NOT NULL,
  components TEXT NOT NULL
);
`;

// Context-management events, added without a version bump: created on every open (IF NOT EXISTS),
// so files of any version gain the table and builds that do not know it simply ignore it.
const CONTEXT_EVENTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS context_events (
  program_id TEXT NOT NULL REFERENCES programs(id),
  call_index INTEGER NOT NULL,
  policy TEXT NOT NULL,
  action TEXT NOT NULL,
  tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL,
  messages_before INTEGER NOT NULL,
  messages_after INTEGER NOT NULL,
  detail TEXT
);
CREATE INDEX IF NOT EXISTS context_events_program ON context_events(program_id);
`;

const CONTEXT_ACTIONS: readonly ContextAction[] = ["discard", "clear-thinking", "summarize"];

// Who started each run (run-owner.ts), added like context_events: an unfinished run whose owner is
// gone is ended, with its active programs, when the store is next opened.
const RUN_OWNERS_SCHEMA = `
CREATE TABLE IF NOT EXISTS run_owners (
  run_id TEXT PRIMARY KEY REFERENCES runs(id),
  host TEXT NOT NULL,
  boot_id TEXT NOT NULL,
  pid INTEGER NOT NULL,
  pid_start INTEGER NOT NULL
);
`;

export interface SqliteStoreOptions extends WriteQueueOptions {
  /** `full` (default) fsyncs every commit, so a recorded call survives power loss; `normal` survives process crashes only. */
  synchronous?: "full" | "normal";
  /** End time of runs and programs ended on open because their process died (default: the wall clock). */
  clock?: Clock;
}


/** A groups row as SQLite returns it (members as JSON text). */
type GroupRow = Omit<StoredGroupRow, "program_ids"> & { program_ids: string };

function fail(message: string): never {
  throw new ArborError(message, "store");
}

/** A check that fails the write unless the query finds a row. */
function mustFind(sql: string, params: unknown[], fail: string): WriteStep {
  return { sql, params, expect: "row", fail };
}

/** A check that fails the write if the query finds a row (`{column}` in `fail` names what it found). */
function mustNotFind(sql: string, params: unknown[], fail: string): WriteStep {
  return { sql, params, expect: "none", fail };
}

function exec(sql: string, params: unknown[]): WriteStep {
  return { sql, params };
}

const requireRunStep = (runId: string, what: string): WriteStep => mustFind("SELECT 1 FROM runs WHERE id = ?", [runId], `${what}: unknown run '${runId}'`);

/** The program must exist and not be ended. */
function activeProgramSteps(programId: string, what: string): WriteStep[] {
  return [
    mustFind("SELECT 1 FROM programs WHERE id = ?", [programId], `${what}: unknown program '${programId}'`),
    mustNotFind(
      "SELECT termination_kind FROM programs WHERE id = ? AND termination_kind IS NOT NULL",
      [programId],
      `${what}: program '${programId}' already ended ({termination_kind})`,
    ),
  ];
}

interface OwnerRow {
  id: string;
  host: string | null;
  boot_id: string | null;
  pid: number | null;
  pid_start: number | null;
}

/**
 * A {@link TrajectoryStore} in one SQLite file (or `:memory:`). Reads run on this thread; writes go
 * through a bounded queue and are committed in batches by a writer thread (sqlite-write-queue.ts),
 * each write's promise resolving once its transaction has committed. A read waits for the writes
 * queued before it, so a caller reads back what it wrote.
 */
export class SqliteTrajectoryStore implements TrajectoryStore {
  private readonly db: Database.Database;
  private readonly writes: SqliteWriteQueue;
  private closing: Promise<void> | undefined;
  /** What opening the store ended because the process that ran it had died. */
  readonly recovered: Recovered;

  /**
   * Open (creating if needed) the store at `path`. Parent directories are created. Unfinished runs
   * whose process is gone are ended, their active programs as `aborted` with the reason. Throws an
   * {@link ArborError} if the file is not a SQLite database or has another schema version.
   */
  constructor(
    readonly path: string,
    options: SqliteStoreOptions = {},
  ) {
    const memory = path === ":memory:" || path === "";
    if (!memory) mkdirSync(dirname(path), { recursive: true });
    try {
      this.db = new Database(path);
    } catch (e) {
      fail(`cannot open store ${path}: ${(e as Error).message}`);
    }
    const synchronous = options.synchronous === "normal" ? "normal" : "full";
    try {
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("foreign_keys = ON");
      this.db.pragma(`synchronous = ${synchronous === "normal" ? "NORMAL" : "FULL"}`);
      this.db.pragma("busy_timeout = 5000");
      this.migrate();
      this.db.exec(CONTEXT_EVENTS_SCHEMA);
      this.db.exec(RUN_OWNERS_SCHEMA);
      this.recovered = this.recover((options.clock ?? realClock).now());
      this.writes = new SqliteWriteQueue(path, synchronous, { ...options, ...(memory ? { inline: this.db } : {}) });
    } catch (e) {
      this.db.close();
      if (e instanceof ArborError) throw e;
      fail(`cannot open store ${path}: ${(e as Error).message}`);
    }
  }

  private migrate(): void {
    const has = this.db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
      .get();
    if (!has) {
      const tables = this.db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
      if (tables.n > 0) fail(`store ${this.path}: database has tables but no schema_version; not an Arbor store`);
      this.db.transaction(() => {
        this.db.exec(SCHEMA);
        this.db.prepare("INSERT INTO schema_version (version) VALUES (?)").run(SQLITE_SCHEMA_VERSION);
      })();
      return;
    }
    const row = this.db.prepare("SELECT version FROM schema_version").get() as { version: number } | undefined;
    // Each step only adds columns whose defaults describe the old rows, so files upgrade in place:
    // version 2 adds the calls' trainable/context_reset flags, version 3 their per-token versions,
    // version 4 their served model name, version 5 their context reset reason.
    // version 6 the requested model and clamped max_tokens, version 7 the groups' iteration, version 8 the
    // held-out groups' scored version, version 9 the calls' deltas (call-delta.ts; older rows are whole), version 10
    // the groups' attempt.
    const steps: Record<number, string> = { 1: V1_TO_V2, 2: V2_TO_V3, 3: V3_TO_V4, 4: V4_TO_V5, 5: V5_TO_V6, 6: V6_TO_V7, 7: V7_TO_V8, 8: V8_TO_V9, 9: V9_TO_V10 };
    const from = row?.version;
    if (from !== undefined && from in steps) {
      this.db.transaction(() => {
        for (let v = from; v < SQLITE_SCHEMA_VERSION; v++) this.db.exec(steps[v] as string);
        this.db.prepare("UPDATE schema_version SET version = ?").run(SQLITE_SCHEMA_VERSION);
      })();
      return;
    }
    if (row?.version !== SQLITE_SCHEMA_VERSION) {
      fail(`store ${this.path}: schema version ${row?.version ?? "missing"}, this build expects ${SQLITE_SCHEMA_VERSION}`);
    }
  }

  /** End every unfinished run whose owner process is gone, and its active programs as `aborted`. */
  private recover(now: number): Recovered {
    const db = this.db;
    return db.transaction(() => {
      const open = db
        .prepare(
          `SELECT r.id, o.host, o.boot_id, o.pid, o.pid_start FROM runs r LEFT JOIN run_owners o ON o.run_id = r.id
           WHERE r.ended_at IS NULL ORDER BY r.rowid`,
        )
        .all() as OwnerRow[];
      const recovered: Recovered = { runs: [], programs: [] };
      for (const r of open) {
        const owner = r.host === null ? undefined : { host: r.host, bootId: r.boot_id ?? "", pid: r.pid ?? -1, pidStart: r.pid_start ?? -1 };
        if (owner && ownerAlive(owner)) continue;
        const who = owner ? `its process (pid ${owner.pid} on ${owner.host}) is gone` : "no process is recorded as running it";
        const detail = `run '${r.id}' ended without finishing: ${who}; ended when the store was next opened`;
        const programs = (db.prepare("SELECT id FROM programs WHERE run_id = ? AND termination_kind IS NULL ORDER BY rowid").all(r.id) as { id: string }[]).map(
          (p) => p.id,
        );
        db.prepare(
          `UPDATE programs SET state = 'terminated', ended_at = ?, termination_kind = 'aborted', termination_detail = ?
           WHERE run_id = ? AND termination_kind IS NULL`,
        ).run(now, detail, r.id);
        db.prepare("UPDATE runs SET ended_at = ? WHERE id = ?").run(now, r.id);
        recovered.runs.push(r.id);
        recovered.programs.push(...programs);
      }
      return recovered;
    })();
  }

  /** The connection to read from, once every write queued before this read has settled. */
  private async reader(): Promise<Database.Database> {
    if (this.closing) fail(`store ${this.path} is closed`);
    await this.writes.settled();
    if (this.closing) fail(`store ${this.path} is closed`);
    return this.db;
  }

  private write(steps: WriteStep[]): Promise<void> {
    if (this.closing) return Promise.reject(new ArborError(`store ${this.path} is closed`, "store"));
    return this.writes.write(steps);
  }

  private static programRow(db: Database.Database, id: string): ProgramRow | undefined {
    return db.prepare("SELECT * FROM programs WHERE id = ?").get(id) as ProgramRow | undefined;
  }

  private static requireRun(db: Database.Database, runId: string, what: string): void {
    if (!db.prepare("SELECT 1 FROM runs WHERE id = ?").get(runId)) fail(`${what}: unknown run '${runId}'`);
  }

  async createRun(run: NewRun): Promise<void> {
    requireString(run.id, "run.id");
    requireString(run.name, "run.name");
    if (typeof run.configJson !== "string") fail("run.configJson: must be a string");
    requireFinite(run.startedAt, "run.startedAt");
    const owner = currentOwner();
    await this.write([
      mustNotFind("SELECT 1 FROM runs WHERE id = ?", [run.id], `createRun: run '${run.id}' already exists`),
      exec("INSERT INTO runs (id, name, config_json, started_at) VALUES (?, ?, ?, ?)", [run.id, run.name, run.configJson, run.startedAt]),
      exec("INSERT INTO run_owners (run_id, host, boot_id, pid, pid_start) VALUES (?, ?, ?, ?, ?)", [
        run.id,
        owner.host,
        owner.bootId,
        owner.pid,
        owner.pidStart,
      ]),
    ]);
  }

  async finishRun(id: string, endedAt: number): Promise<void> {
    requireFinite(endedAt, "endedAt");
    await this.write([
      mustFind("SELECT 1 FROM runs WHERE id = ?", [id], `finishRun: unknown run '${id}'`),
      mustNotFind("SELECT 1 FROM runs WHERE id = ? AND ended_at IS NOT NULL", [id], `finishRun: run '${id}' already finished`),
      exec("UPDATE runs SET ended_at = ? WHERE id = ?", [endedAt, id]),
    ]);
  }

  async reopenRun(id: string): Promise<void> {
    const owner = currentOwner();
    await this.write([
      mustFind("SELECT 1 FROM runs WHERE id = ?", [id], `reopenRun: unknown run '${id}'`),
      // Open and owned by this process: reopened already (nothing to do); open and another's: refused.
      mustNotFind(
        `SELECT 1 FROM runs r LEFT JOIN run_owners o ON o.run_id = r.id
         WHERE r.id = ? AND r.ended_at IS NULL AND NOT coalesce(o.host = ? AND o.pid = ? AND o.pid_start = ?, 0)`,
        [id, owner.host, owner.pid, owner.pidStart],
        `reopenRun: run '${id}' has not finished (its process may still run it)`,
      ),
      exec("UPDATE runs SET ended_at = NULL WHERE id = ?", [id]),
      exec("INSERT OR REPLACE INTO run_owners (run_id, host, boot_id, pid, pid_start) VALUES (?, ?, ?, ?, ?)", [id, owner.host, owner.bootId, owner.pid, owner.pidStart]),
    ]);
  }

  async getRun(id: string): Promise<RunRecord | undefined> {
    const db = await this.reader();
    const r = db.prepare("SELECT * FROM runs WHERE id = ?").get(id) as RunRow | undefined;
    return r ? runFromRow(r) : undefined;
  }

  async listRuns(): Promise<RunRecord[]> {
    const db = await this.reader();
    return (db.prepare("SELECT * FROM runs ORDER BY rowid").all() as RunRow[]).map(runFromRow);
  }

  async createGroup(group: Group): Promise<void> {
    requireString(group.id, "group.id");
    requireString(group.taskId, "group.taskId");
    if (!Array.isArray(group.programIds)) fail("group.programIds: must be an array");
    if (new Set(group.programIds).size !== group.programIds.length) fail(`group '${group.id}': duplicate program ids`);
    requireIteration(group.iteration);
    if (group.heldOutVersion !== undefined) requireIndex(group.heldOutVersion, "group.heldOutVersion");
    if (group.attempt !== undefined) requireIteration(group.attempt, "group.attempt");
    await this.write([
      requireRunStep(group.runId, `createGroup '${group.id}'`),
      mustNotFind("SELECT 1 FROM groups WHERE id = ?", [group.id], `createGroup: group '${group.id}' already exists`),
      exec("INSERT INTO groups (id, run_id, task_id, program_ids, iteration, held_out_version, attempt) VALUES (?, ?, ?, ?, ?, ?, ?)", [
        group.id,
        group.runId,
        group.taskId,
        JSON.stringify(group.programIds),
        group.iteration ?? null,
        group.heldOutVersion ?? null,
        group.attempt ?? null,
      ]),
    ]);
  }

  async createProgram(program: Program): Promise<void> {
    requireString(program.id, "program.id");
    requireString(program.taskId, "program.taskId");
    requireIndex(program.sampleIndex, "program.sampleIndex");
    requireFinite(program.createdAt, "program.createdAt");
    const what = `createProgram '${program.id}'`;
    const g = program.groupId;
    await this.write([
      requireRunStep(program.runId, what),
      mustNotFind("SELECT 1 FROM programs WHERE id = ?", [program.id], `createProgram: program '${program.id}' already exists`),
      mustFind("SELECT 1 FROM groups WHERE id = ?", [g], `${what}: unknown group '${g}'`),
      mustNotFind("SELECT run_id FROM groups WHERE id = ? AND run_id != ?", [g, program.runId], `${what}: group '${g}' belongs to run '{run_id}', not '${program.runId}'`),
      mustNotFind("SELECT task_id FROM groups WHERE id = ? AND task_id != ?", [g, program.taskId], `${what}: group '${g}' is for task '{task_id}', not '${program.taskId}'`),
      // Append the program to its group's members unless the group already lists it.
      exec(
        `UPDATE groups SET program_ids = json_insert(program_ids, '$[#]', ?)
         WHERE id = ? AND NOT EXISTS (SELECT 1 FROM json_each(groups.program_ids) WHERE value = ?)`,
        [program.id, g, program.id],
      ),
      exec(`INSERT INTO programs (${PROGRAM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, programRowValues(program)),
    ]);
  }

  async recordCall(call: Call): Promise<void> {
    checkCall(call);
    const prompt = encodeTokenIds(call.promptTokenIds, `call '${call.id}' promptTokenIds`);
    const output = encodeTokenIds(call.outputTokenIds, `call '${call.id}' outputTokenIds`);
    const logprobs = encodeFloat64s(call.logprobs, `call '${call.id}' logprobs`);
    const versions = encodeTokenVersions(call);
    const what = `recordCall '${call.id}'`;
    await this.write([
      ...activeProgramSteps(call.programId, what),
      mustNotFind("SELECT 1 FROM calls WHERE id = ?", [call.id], `${what}: duplicate call id`),
      mustNotFind(
        "SELECT 1 FROM calls WHERE program_id = ? AND idx = ?",
        [call.programId, call.index],
        `${what}: program '${call.programId}' already has a call at index ${call.index}`,
      ),
      {
        sql: `INSERT INTO calls (id, program_id, idx, output_token_ids, logprobs, output_text, finish_reason, backend,
           policy_version, start_ms, end_ms, trainable, context_reset, token_policy_versions, served_model, context_reset_reason,
           requested_model, max_tokens_asked, max_tokens_granted, messages, prompt_token_ids, base_idx, prompt_shared, messages_shared)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        // The writer appends the last five: the call stored over its program's last committed one.
        params: [
          call.id,
          call.programId,
          call.index,
          output,
          logprobs,
          call.outputText,
          call.finishReason,
          call.backend,
          call.policyVersion,
          call.timings.start,
          call.timings.end,
          call.trainable === false ? 0 : 1,
          call.contextReset === true ? 1 : 0,
          versions,
          call.servedModel ?? null,
          call.contextResetReason ?? null,
          call.requestedModel ?? null,
          call.maxTokensClamped?.asked ?? null,
          call.maxTokensClamped?.granted ?? null,
        ],
        call: { programId: call.programId, index: call.index, prompt, output, messages: call.messages.map((m) => JSON.stringify(m)) },
      },
    ]);
  }

  async recordTool(event: ToolEvent): Promise<void> {
    requireIndex(event.callIndex, "tool.callIndex");
    requireString(event.tool, "tool.tool");
    requireFinite(event.durationMs, "tool.durationMs");
    await this.write([
      ...activeProgramSteps(event.programId, `recordTool '${event.tool}'`),
      exec("INSERT INTO tools (program_id, call_index, tool, input, output, ok, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?)", [
        event.programId,
        event.callIndex,
        event.tool,
        event.input,
        event.output,
        event.ok ? 1 : 0,
        event.durationMs,
      ]),
    ]);
  }

  async recordContextEvent(event: ContextEvent): Promise<void> {
    const what = `recordContextEvent '${event?.policy}'`;
    requireIndex(event.callIndex, "contextEvent.callIndex");
    requireString(event.policy, "contextEvent.policy");
    if (!CONTEXT_ACTIONS.includes(event.action)) fail(`${what}: unknown action '${String(event.action)}'`);
    for (const f of ["tokensBefore", "tokensAfter", "messagesBefore", "messagesAfter"] as const) {
      requireIndex(event[f], `contextEvent.${f}`);
    }
    await this.write([
      ...activeProgramSteps(event.programId, what),
      exec(
        `INSERT INTO context_events (program_id, call_index, policy, action, tokens_before, tokens_after, messages_before,
           messages_after, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          event.programId,
          event.callIndex,
          event.policy,
          event.action,
          event.tokensBefore,
          event.tokensAfter,
          event.messagesBefore,
          event.messagesAfter,
          event.detail ?? null,
        ],
      ),
    ]);
  }

  async endProgram(programId: string, termination: Termination, endedAt: number): Promise<void> {
    if (!TERMINATION_KINDS.includes(termination?.kind)) fail(`endProgram '${programId}': unknown termination kind '${termination?.kind}'`);
    requireFinite(endedAt, "endedAt");
    await this.write([
      ...activeProgramSteps(programId, "endProgram"),
      exec("UPDATE programs SET state = 'terminated', ended_at = ?, termination_kind = ?, termination_detail = ? WHERE id = ?", [
        endedAt,
        termination.kind,
        termination.detail ?? null,
        programId,
      ]),
      // No call of it follows: the writer no longer keeps its last one.
      { forget: programId },
    ]);
  }

  async setReward(programId: string, reward: Reward): Promise<void> {
    requireFinite(reward?.total, `reward of '${programId}' total`);
    for (const [name, v] of Object.entries(reward.components ?? {})) requireFinite(v, `reward of '${programId}' component '${name}'`);
    await this.write([
      mustFind("SELECT 1 FROM programs WHERE id = ?", [programId], `setReward: unknown program '${programId}'`),
      mustNotFind("SELECT 1 FROM programs WHERE id = ? AND termination_kind IS NULL", [programId], `setReward: program '${programId}' has not ended`),
      mustNotFind("SELECT 1 FROM rewards WHERE program_id = ?", [programId], `setReward: program '${programId}' already has a reward`),
      exec("INSERT INTO rewards (program_id, total, components) VALUES (?, ?, ?)", [programId, reward.total, JSON.stringify(reward.components ?? {})]),
    ]);
  }

  async getTrajectory(programId: string): Promise<Trajectory | undefined> {
    const db = await this.reader();
    return db.transaction(() => {
      const p = SqliteTrajectoryStore.programRow(db, programId);
      if (!p) return undefined;
      const calls = db.prepare("SELECT * FROM calls WHERE program_id = ? ORDER BY idx").all(programId) as DeltaCallRow[];
      const tools = db.prepare("SELECT * FROM tools WHERE program_id = ? ORDER BY rowid").all(programId) as ToolRow[];
      const reward = db.prepare("SELECT * FROM rewards WHERE program_id = ?").get(programId) as RewardRow | undefined;
      const events = db.prepare("SELECT * FROM context_events WHERE program_id = ? ORDER BY rowid").all(programId) as ContextEventRow[];
      const t: Trajectory = { program: programFromRow(p), calls: resolveCalls(calls), tools: tools.map(toolFromRow) };
      if (reward) t.reward = rewardFromRow(reward);
      if (events.length > 0) t.contextEvents = events.map(contextEventFromRow);
      return t;
    })();
  }

  async listTrajectories(runId: string): Promise<Trajectory[]> {
    const db = await this.reader();
    // One read transaction: a consistent snapshot even while the writer commits calls.
    return db.transaction(() => {
      SqliteTrajectoryStore.requireRun(db, runId, "listTrajectories");
      const programs = db.prepare("SELECT * FROM programs WHERE run_id = ? ORDER BY rowid").all(runId) as ProgramRow[];
      const byId = new Map<string, Trajectory>();
      for (const p of programs) byId.set(p.id, { program: programFromRow(p), calls: [], tools: [] });
      const join = "JOIN programs p ON p.id = x.program_id WHERE p.run_id = ?";
      const rows = db.prepare(`SELECT x.* FROM calls x ${join} ORDER BY x.program_id, x.idx`).all(runId) as DeltaCallRow[];
      resolveByProgram(rows, (programId, calls) => byId.get(programId)?.calls.push(...calls));
      for (const r of db.prepare(`SELECT x.* FROM tools x ${join} ORDER BY x.rowid`).all(runId) as ToolRow[]) {
        byId.get(r.program_id)?.tools.push(toolFromRow(r));
      }
      for (const r of db.prepare(`SELECT x.* FROM context_events x ${join} ORDER BY x.rowid`).all(runId) as ContextEventRow[]) {
        const t = byId.get(r.program_id);
        if (t) (t.contextEvents ??= []).push(contextEventFromRow(r));
      }
      for (const r of db.prepare(`SELECT x.* FROM rewards x ${join}`).all(runId) as RewardRow[]) {
        const t = byId.get(r.program_id);
        if (t) t.reward = rewardFromRow(r);
      }
      return [...byId.values()];
    })();
  }

  async listGroups(runId: string): Promise<Group[]> {
    const db = await this.reader();
    return db.transaction(() => {
      SqliteTrajectoryStore.requireRun(db, runId, "listGroups");
      const rows = db.prepare("SELECT * FROM groups WHERE run_id = ? ORDER BY rowid").all(runId) as GroupRow[];
      return rows.map((g) => groupFromRow({ ...g, program_ids: JSON.parse(g.program_ids) as string[] }));
    })();
  }

  async activePrograms(runId: string): Promise<{ id: string; calls: number }[]> {
    const db = await this.reader();
    return db.transaction(() => {
      SqliteTrajectoryStore.requireRun(db, runId, "activePrograms");
      return db
        .prepare(
          `SELECT p.id AS id, (SELECT count(*) FROM calls c WHERE c.program_id = p.id) AS calls
           FROM programs p WHERE p.run_id = ? AND p.termination_kind IS NULL ORDER BY p.rowid`,
        )
        .all(runId) as { id: string; calls: number }[];
    })();
  }

  async stats(runId: string): Promise<RunStats> {
    const db = await this.reader();
    return db.transaction(() => {
      SqliteTrajectoryStore.requireRun(db, runId, "stats");
      const progs = db
        .prepare("SELECT count(*) AS n, sum(termination_kind IS NULL) AS open FROM programs WHERE run_id = ?")
        .get(runId) as { n: number; open: number | null };
      const calls = db
        .prepare(
          `SELECT count(*) AS n, sum(c.prompt_shared + length(c.prompt_token_ids) / 4) AS prompt, sum(length(c.output_token_ids)) / 4 AS output
           FROM calls c JOIN programs p ON p.id = c.program_id WHERE p.run_id = ?`,
        )
        .get(runId) as { n: number; prompt: number | null; output: number | null };
      const terminations = Object.fromEntries(TERMINATION_KINDS.map((k) => [k, 0])) as Record<TerminationKind, number>;
      const kinds = db
        .prepare(
          `SELECT termination_kind AS kind, count(*) AS n FROM programs
           WHERE run_id = ? AND termination_kind IS NOT NULL GROUP BY termination_kind`,
        )
        .all(runId) as { kind: TerminationKind; n: number }[];
      for (const k of kinds) terminations[k.kind] = k.n;
      const rewards = db
        .prepare("SELECT count(*) AS n, avg(r.total) AS mean FROM rewards r JOIN programs p ON p.id = r.program_id WHERE p.run_id = ?")
        .get(runId) as { n: number; mean: number | null };
      return {
        programs: progs.n,
        unfinished: progs.open ?? 0,
        calls: calls.n,
        promptTokens: calls.prompt ?? 0,
        outputTokens: calls.output ?? 0,
        terminations,
        rewarded: rewards.n,
        meanReward: rewards.n > 0 ? rewards.mean : null,
      };
    })();
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.writes.close();
      } finally {
        this.db.close();
      }
    })();
    return this.closing;
  }
}
