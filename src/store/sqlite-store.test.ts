import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { decodeFloat64s, decodeTokenIds } from "./codec.js";
import { createStore } from "./registry.js";
import { SQLITE_SCHEMA_VERSION, SqliteTrajectoryStore } from "./sqlite-store.js";
import { SqliteWriteQueue } from "./sqlite-write-queue.js";
import type { Call } from "../core/types.js";
import { conversationProgram, fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { describeTrajectoryStoreContract, TRICKY_LOGPROBS } from "./trajectory-store.contract.js";

// Undoes version 6 (requested model, clamped max_tokens) in the upgrade tests of older versions.
// Undoes version 7 (the groups' iteration), version 8 (held-out groups' version), version 9 (the calls' deltas)
// and version 10 (the groups' attempt) there too.
const DROP_V10 = "ALTER TABLE groups DROP COLUMN attempt;";
const DROP_V9 = `ALTER TABLE calls DROP COLUMN base_idx; ALTER TABLE calls DROP COLUMN prompt_shared; ALTER TABLE calls DROP COLUMN messages_shared; ${DROP_V10}`;
const DROP_V6 = `ALTER TABLE calls DROP COLUMN requested_model; ALTER TABLE calls DROP COLUMN max_tokens_asked; ALTER TABLE calls DROP COLUMN max_tokens_granted; ALTER TABLE groups DROP COLUMN iteration; ALTER TABLE groups DROP COLUMN held_out_version; ${DROP_V9}`;

/** Turn a store file back into what an older version wrote (`sql` drops its newer columns and sets the version). */
function rewindSchema(path: string, sql: string): void {
  const db = new Database(path);
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
}

/** The file at `path` has been upgraded to the current schema version. */
function expectCurrentSchema(path: string): void {
  const check = new Database(path, { readonly: true });
  try {
    expect(check.prepare("SELECT version FROM schema_version").get()).toEqual({ version: SQLITE_SCHEMA_VERSION });
  } finally {
    check.close();
  }
}

describeTrajectoryStoreContract(
  "sqlite file",
  () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-store-"));
    const path = join(dir, "nested", "store.sqlite");
    return { open: () => new SqliteTrajectoryStore(path), dispose: () => rmSync(dir, { recursive: true, force: true }) };
  },
  { persistent: true },
);

describeTrajectoryStoreContract(
  "sqlite :memory:",
  () => ({ open: () => new SqliteTrajectoryStore(":memory:"), dispose: () => undefined }),
  { persistent: false },
);

describe("SqliteTrajectoryStore on disk", () => {
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-store-"));
    path = join(dir, "store.sqlite");
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("uses WAL, foreign keys and the exact binary encodings; a recorded call is visible to another connection at once", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const call = { ...fixtureCall("g1-p0", 0, TRICKY_LOGPROBS), outputTokenIds: TRICKY_LOGPROBS.map((_, i) => 0x7fffffff - i) };
    await store.recordCall(call);
    const other = new Database(path, { readonly: true });
    try {
      expect(other.pragma("journal_mode", { simple: true })).toBe("wal");
      const row = other.prepare("SELECT output_token_ids, logprobs FROM calls WHERE id = ?").get(call.id) as {
        output_token_ids: Buffer;
        logprobs: Buffer;
      };
      expect(row.output_token_ids.length).toBe(call.outputTokenIds.length * 4);
      expect(row.output_token_ids.readInt32LE(0)).toBe(0x7fffffff);
      expect(decodeTokenIds(row.output_token_ids)).toEqual(call.outputTokenIds);
      expect(row.logprobs.length).toBe(TRICKY_LOGPROBS.length * 8);
      expect(row.logprobs.readDoubleLE(0)).toBe(-1e-12);
      expect(decodeFloat64s(row.logprobs)).toEqual(TRICKY_LOGPROBS);
      expect(other.prepare("SELECT version FROM schema_version").get()).toEqual({ version: SQLITE_SCHEMA_VERSION });
    } finally {
      other.close();
      await store.close();
    }
  });

  it("keeps a call's text-only and context-reset flags, and absent flags stay absent", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const plain = fixtureCall("g1-p0", 0, [-0.5]);
    const textOnly = { ...fixtureCall("g1-p0", 1, []), promptTokenIds: [], outputTokenIds: [], trainable: false as const, contextReset: true as const };
    await store.recordCall(plain);
    await store.recordCall(textOnly);
    await store.close();
    const again = new SqliteTrajectoryStore(path);
    try {
      const calls = (await again.getTrajectory("g1-p0"))?.calls ?? [];
      expect(calls).toEqual([plain, textOnly]);
      expect("trainable" in (calls[0] as object)).toBe(false);
    } finally {
      await again.close();
    }
  });

  it("upgrades a version-1 file in place: old calls read back as trainable", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const call = fixtureCall("g1-p0", 0, [-0.25]);
    await store.recordCall(call);
    await store.close();
    // Turn the file back into what version 1 wrote: no flag columns.
    rewindSchema(path, `ALTER TABLE calls DROP COLUMN trainable; ALTER TABLE calls DROP COLUMN context_reset; ALTER TABLE calls DROP COLUMN token_policy_versions; ALTER TABLE calls DROP COLUMN served_model; ALTER TABLE calls DROP COLUMN context_reset_reason; ${DROP_V6} UPDATE schema_version SET version = 1;`);
    const upgraded = new SqliteTrajectoryStore(path);
    try {
      expect((await upgraded.getTrajectory("g1-p0"))?.calls).toEqual([call]);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("keeps a call's per-token policy versions exactly, and refuses a list that does not match the output", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const resumed = { ...fixtureCall("g1-p0", 0, [-0.5, -1, -2]), policyVersion: 4, tokenPolicyVersions: [3, 3, 4] };
    await store.recordCall(resumed);
    const short = { ...fixtureCall("g1-p0", 1, [-0.5, -1]), tokenPolicyVersions: [3] };
    await expect(store.recordCall(short)).rejects.toThrow(/call 'g1-p0-c1': 1 tokenPolicyVersions for 2 output tokens/);
    const negative = { ...fixtureCall("g1-p0", 1, [-0.5]), tokenPolicyVersions: [-1] };
    await expect(store.recordCall(negative)).rejects.toThrow(/tokenPolicyVersions\[0\]/);
    const plain = fixtureCall("g1-p0", 1, [-0.25]);
    await store.recordCall(plain);
    await store.close();
    const again = new SqliteTrajectoryStore(path);
    try {
      const calls = (await again.getTrajectory("g1-p0"))?.calls;
      expect(calls).toEqual([resumed, plain]);
      expect("tokenPolicyVersions" in (calls![1] as object)).toBe(false);
    } finally {
      await again.close();
    }
  });

  it("upgrades a version-2 file in place: old calls read back without per-token versions and new ones keep theirs", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const old = { ...fixtureCall("g1-p0", 0, [-0.25]), contextReset: true as const };
    await store.recordCall(old);
    await store.close();
    // Turn the file back into what version 2 wrote: no per-token versions column.
    rewindSchema(path, `ALTER TABLE calls DROP COLUMN token_policy_versions; ALTER TABLE calls DROP COLUMN served_model; ALTER TABLE calls DROP COLUMN context_reset_reason; ${DROP_V6} UPDATE schema_version SET version = 2;`);
    const upgraded = new SqliteTrajectoryStore(path);
    const resumed = { ...fixtureCall("g1-p0", 1, [-1, -2]), tokenPolicyVersions: [2, 3] };
    try {
      expect((await upgraded.getTrajectory("g1-p0"))?.calls).toEqual([old]);
      await upgraded.recordCall(resumed);
    } finally {
      await upgraded.close();
    }
    const reopened = new SqliteTrajectoryStore(path);
    try {
      expect((await reopened.getTrajectory("g1-p0"))?.calls).toEqual([old, resumed]);
    } finally {
      await reopened.close();
    }
    expectCurrentSchema(path);
  });

  it("keeps each call's served model name (version 4), and upgrades a version-3 file in place", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const old = fixtureCall("g1-p0", 0, [-0.25]);
    await store.recordCall(old);
    await store.close();
    rewindSchema(path, `ALTER TABLE calls DROP COLUMN served_model; ALTER TABLE calls DROP COLUMN context_reset_reason; ${DROP_V6} UPDATE schema_version SET version = 3;`);
    const upgraded = new SqliteTrajectoryStore(path);
    const served = { ...fixtureCall("g1-p0", 1, [-1]), servedModel: "calc-policy" };
    try {
      await upgraded.recordCall(served);
      expect((await upgraded.getTrajectory("g1-p0"))?.calls).toEqual([old, served]);
    } finally {
      await upgraded.close();
    }
  });

  it("keeps each call's context reset reason (version 5), and upgrades a version-4 file in place", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const old = { ...fixtureCall("g1-p0", 0, [-0.25]), contextReset: true as const };
    await store.recordCall(old);
    await store.close();
    rewindSchema(path, `ALTER TABLE calls DROP COLUMN context_reset_reason; ${DROP_V6} UPDATE schema_version SET version = 4;`);
    const upgraded = new SqliteTrajectoryStore(path);
    const reset = { ...fixtureCall("g1-p0", 1, [-1]), contextReset: true as const, contextResetReason: "template re-renders earlier turns" };
    try {
      await upgraded.recordCall(reset);
      expect((await upgraded.getTrajectory("g1-p0"))?.calls).toEqual([old, reset]);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("keeps each call's requested model and clamped max_tokens (version 6), and upgrades a version-5 file in place", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const old = fixtureCall("g1-p0", 0, [-0.25]);
    await store.recordCall(old);
    await store.close();
    rewindSchema(path, `${DROP_V6} UPDATE schema_version SET version = 5;`);
    const upgraded = new SqliteTrajectoryStore(path);
    const clamped = { ...fixtureCall("g1-p0", 1, [-1]), requestedModel: "gpt-4o-mini", maxTokensClamped: { asked: 64000, granted: 100 } };
    try {
      await upgraded.recordCall(clamped);
      expect((await upgraded.getTrajectory("g1-p0"))?.calls).toEqual([old, clamped]);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("keeps each group's iteration (version 7), and upgrades a version-6 file in place: its groups' iteration unknown", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    await store.createGroup(fixtureGroup("g1", "run-1", 1));
    await store.close();
    rewindSchema(path, `ALTER TABLE groups DROP COLUMN iteration; ALTER TABLE groups DROP COLUMN held_out_version; ${DROP_V9} UPDATE schema_version SET version = 6;`);
    const upgraded = new SqliteTrajectoryStore(path);
    try {
      await upgraded.createGroup({ ...fixtureGroup("g2", "run-1", 1), iteration: 2 });
      expect(await upgraded.listGroups("run-1")).toEqual([fixtureGroup("g1", "run-1", 1), { ...fixtureGroup("g2", "run-1", 1), iteration: 2 }]);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("upgrades a version-7 file in place: its groups are training groups, and new held-out groups keep their version", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    await store.createGroup({ ...fixtureGroup("g1", "run-1", 1), iteration: 1 });
    await store.close();
    rewindSchema(path, `ALTER TABLE groups DROP COLUMN held_out_version; ${DROP_V9} UPDATE schema_version SET version = 7;`);
    const upgraded = new SqliteTrajectoryStore(path);
    try {
      await upgraded.createGroup({ ...fixtureGroup("e1", "run-1", 1), heldOutVersion: 0 });
      expect(await upgraded.listGroups("run-1")).toEqual([{ ...fixtureGroup("g1", "run-1", 1), iteration: 1 }, { ...fixtureGroup("e1", "run-1", 1), heldOutVersion: 0 }]);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("upgrades a version-8 file in place: its calls (whole) read back beside new ones stored as deltas", async () => {
    const store = new SqliteTrajectoryStore(path);
    const calls = await conversationProgram(store);
    await store.recordCall(calls[0] as Call);
    await store.close();
    rewindSchema(path, `${DROP_V9} UPDATE schema_version SET version = 8;`);
    const upgraded = new SqliteTrajectoryStore(path);
    try {
      for (const c of calls.slice(1)) await upgraded.recordCall(c);
      expect((await upgraded.getTrajectory("g1-p0"))?.calls).toEqual(calls);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("upgrades a version-9 file in place: its groups read back without an attempt, new ones with theirs", async () => {
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    await store.createGroup({ ...fixtureGroup("it3/g0", "run-1", 0), iteration: 3 });
    await store.close();
    rewindSchema(path, `${DROP_V10} UPDATE schema_version SET version = 9;`);
    const upgraded = new SqliteTrajectoryStore(path);
    try {
      await upgraded.createGroup({ ...fixtureGroup("it3-r1/g0", "run-1", 0), iteration: 3, attempt: 1 });
      expect((await upgraded.listGroups("run-1")).map((g) => [g.id, g.iteration, g.attempt])).toEqual([
        ["it3/g0", 3, undefined],
        ["it3-r1/g0", 3, 1],
      ]);
    } finally {
      await upgraded.close();
    }
    expectCurrentSchema(path);
  });

  it("stores a program's calls as deltas over the call before, and names a call whose base is gone", async () => {
    const store = new SqliteTrajectoryStore(path);
    const calls = await conversationProgram(store);
    for (const c of calls) await store.recordCall(c);
    await store.close();
    const db = new Database(path);
    try {
      const rows = db.prepare("SELECT idx, base_idx, prompt_shared, length(prompt_token_ids) / 4 AS rest, messages_shared FROM calls ORDER BY idx").all();
      // Call 1 starts with all of call 0's 53 tokens (prompt and output), call 2 (after a context reset) with 10 of
      // call 1's and only its system prompt; the first call of a program is whole.
      expect(rows).toEqual([
        { idx: 0, base_idx: null, prompt_shared: 0, rest: 50, messages_shared: 0 },
        { idx: 1, base_idx: 0, prompt_shared: 53, rest: 1, messages_shared: 2 },
        { idx: 2, base_idx: 1, prompt_shared: 10, rest: 3, messages_shared: 1 },
        { idx: 3, base_idx: 2, prompt_shared: 16, rest: 1, messages_shared: 2 },
        { idx: 4, base_idx: 3, prompt_shared: 20, rest: 1, messages_shared: 4 },
      ]);
      db.prepare("DELETE FROM calls WHERE idx = 2").run();
    } finally {
      db.close();
    }
    const reopened = new SqliteTrajectoryStore(path);
    try {
      await expect(reopened.getTrajectory("g1-p0")).rejects.toThrow("store: call 'g1-p0-c3' (program 'g1-p0', index 3) is corrupt: its base call 2 is missing");
    } finally {
      await reopened.close();
    }
  });

  it("never stores a call over one the writer refused", async () => {
    const store = new SqliteTrajectoryStore(path);
    try {
      const calls = await conversationProgram(store);
      await store.recordCall(calls[0] as Call);
      // Call 1 refused by the insert itself (a NOT NULL column left out, past every check), then call 1 again
      // starting with the refused call's tokens (not call 0's): stored over the refused call, it would read back
      // over call 0's tokens, wrong.
      const refused = { ...(calls[1] as Call), id: "refused", outputTokenIds: [7, 8, 9], outputText: undefined } as unknown as Call;
      const next: Call = { ...(calls[1] as Call), promptTokenIds: [...(calls[0] as Call).promptTokenIds, 7, 8, 9, 61] };
      const settled = await Promise.allSettled([store.recordCall(refused), store.recordCall(next)]);
      expect(settled.map((s) => s.status)).toEqual(["rejected", "fulfilled"]);
      expect(String((settled[0] as PromiseRejectedResult).reason)).toMatch(/NOT NULL/);
      expect((await store.getTrajectory("g1-p0"))?.calls).toEqual([calls[0], next]);
    } finally {
      await store.close();
    }
  });

  it("reopenRun refuses a run still open in another process", async () => {
    const store = new SqliteTrajectoryStore(path);
    try {
      await store.createRun(fixtureRun());
      await store.close();
      // The run's owner is now a process on another host: alive as far as this host can tell, and not this one.
      const db = new Database(path);
      db.prepare("UPDATE run_owners SET host = 'another-host'").run();
      db.close();
      const other = new SqliteTrajectoryStore(path);
      try {
        await expect(other.reopenRun("run-1")).rejects.toThrow("reopenRun: run 'run-1' has not finished (its process may still run it)");
      } finally {
        await other.close();
      }
    } finally {
      await store.close().catch(() => undefined);
    }
  });

  it("refuses a file with another schema version", async () => {
    await new SqliteTrajectoryStore(path).close();
    const db = new Database(path);
    db.prepare("UPDATE schema_version SET version = 999").run();
    db.close();
    expect(() => new SqliteTrajectoryStore(path)).toThrow(new RegExp(`schema version 999, this build expects ${SQLITE_SCHEMA_VERSION}`));
  });

  it("refuses a database that is not an Arbor store, and a file that is not a database", async () => {
    const db = new Database(path);
    db.exec("CREATE TABLE t (x)");
    db.close();
    expect(() => new SqliteTrajectoryStore(path)).toThrow(/not an Arbor store/);
    const junk = join(dir, "junk.sqlite");
    writeFileSync(junk, "this is not sqlite at all, just some text that is long enough to have a header".repeat(20));
    expect(() => new SqliteTrajectoryStore(junk)).toThrow(ArborError);
  });
});

describe("SqliteTrajectoryStore writes", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-store-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses a write beyond maxPendingWrites at once, naming the limit, and commits the rest", async () => {
    const store = new SqliteTrajectoryStore(join(dir, "s.sqlite"), { maxPendingWrites: 3 });
    try {
      const queued = [store.createRun(fixtureRun("a")), store.createRun(fixtureRun("b")), store.createRun(fixtureRun("c"))];
      await expect(store.createRun(fixtureRun("d"))).rejects.toThrow(/write queue is full \(maxPendingWrites 3 writes waiting to commit\)/);
      await Promise.all(queued);
      expect((await store.listRuns()).map((r) => r.id)).toEqual(["a", "b", "c"]);
      // Room again once they committed.
      await store.createRun(fixtureRun("d"));
    } finally {
      await store.close();
    }
  });

  it("commits writes made in one turn in one transaction (one WAL commit frame set), and each is durable when it resolves", async () => {
    const path = join(dir, "s.sqlite");
    const store = new SqliteTrajectoryStore(path);
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
    const before = new Database(path, { readonly: true });
    const commits = (): number => (before.prepare("PRAGMA data_version").get() as { data_version: number }).data_version;
    const v0 = commits();
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.recordCall(fixtureCall("g-p0", i, [-1]))));
    // data_version moves once per commit seen from another connection: 50 writes, one transaction.
    expect(commits() - v0).toBe(1);
    expect((before.prepare("SELECT count(*) AS n FROM calls").get() as { n: number }).n).toBe(50);
    before.close();
    await store.close();
  });

  it("refuses a write the writer thread cannot be sent, alone, and commits the others of its batch", async () => {
    const queue = new SqliteWriteQueue(join(dir, "q.sqlite"), "full");
    try {
      const ok = queue.write([{ sql: "CREATE TABLE t (x)", params: [] }]);
      const bad = queue.write([{ sql: "INSERT INTO t VALUES (?)", params: [() => 1] }]);
      const after = queue.write([{ sql: "INSERT INTO t VALUES (?)", params: [Buffer.from([1, 2, 3])] }]);
      await expect(bad).rejects.toThrow(/a write cannot be sent to the writer thread: .*could not be cloned/);
      await ok;
      await after;
      // Alone in its batch, it fails too; the queue goes on.
      await expect(queue.write([{ sql: "SELECT ?", params: [Symbol("s")] }])).rejects.toThrow(/cannot be sent to the writer thread/);
      await queue.write([{ sql: "INSERT INTO t VALUES (?)", params: [7] }]);
    } finally {
      await queue.close();
    }
    const db = new Database(join(dir, "q.sqlite"), { readonly: true });
    expect(db.prepare("SELECT x FROM t").all()).toEqual([{ x: Buffer.from([1, 2, 3]) }, { x: 7 }]);
    db.close();
  });

  it("rejects a bad option naming it", () => {
    expect(() => new SqliteTrajectoryStore(":memory:", { maxPendingWrites: 0 })).toThrow(/maxPendingWrites: must be an integer >= 1, got 0/);
  });
});

describe("SqliteTrajectoryStore recovery on open", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-store-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const root = join(import.meta.dirname, "../..");

  /** Start a run with two active programs (one with a call) in another process, which then dies by SIGKILL. */
  function runThenDie(path: string): void {
    const script = `
      import { SqliteTrajectoryStore } from "./src/store/sqlite-store.ts";
      const s = new SqliteTrajectoryStore(${JSON.stringify(path)});
      await s.createRun({ id: "dead", name: "dead", configJson: "{}", startedAt: 1 });
      await s.createGroup({ id: "g", runId: "dead", taskId: "t", programIds: [] });
      for (const i of [0, 1, 2]) await s.createProgram({ id: "p" + i, runId: "dead", taskId: "t", groupId: "g", sampleIndex: i, state: "active", createdAt: 2 });
      await s.endProgram("p2", { kind: "completed" }, 3);
      process.kill(process.pid, "SIGKILL");
    `;
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: root, encoding: "utf8", timeout: 60_000 });
    expect(r.signal, r.stderr).toBe("SIGKILL");
  }

  it("ends the programs a killed run left active as aborted, with the reason, and gives the run an end time", async () => {
    const path = join(dir, "s.sqlite");
    runThenDie(path);
    const store = new SqliteTrajectoryStore(path, { clock: { now: () => 777, setTimer: () => ({ cancel: () => undefined }), sleep: async () => undefined } });
    try {
      expect(store.recovered).toEqual({ runs: ["dead"], programs: ["p0", "p1"] });
      expect((await store.stats("dead")).unfinished).toBe(0);
      const [p0, , p2] = await store.listTrajectories("dead");
      expect(p0?.program).toMatchObject({ state: "terminated", endedAt: 777, termination: { kind: "aborted" } });
      expect(p0?.program.termination?.detail).toMatch(/^run 'dead' ended without finishing: its process \(pid \d+ on .+\) is gone/);
      expect(p2?.program.termination).toEqual({ kind: "completed" });
      expect((await store.getRun("dead"))?.endedAt).toBe(777);
    } finally {
      await store.close();
    }
    // Once ended, reopening changes nothing.
    const again = new SqliteTrajectoryStore(path);
    expect(again.recovered).toEqual({ runs: [], programs: [] });
    await again.close();
  }, 60_000);

  it("leaves a run whose process still lives alone (a second connection is not a new run)", async () => {
    const path = join(dir, "s.sqlite");
    const live = new SqliteTrajectoryStore(path);
    await live.createRun(fixtureRun());
    const g = fixtureGroup("g", "run-1", 1);
    await live.createGroup(g);
    await live.createProgram(fixtureProgram(g, 0));
    const reader = new SqliteTrajectoryStore(path);
    try {
      expect(reader.recovered).toEqual({ runs: [], programs: [] });
      expect((await reader.stats("run-1")).unfinished).toBe(1);
      await live.recordCall(fixtureCall("g-p0", 0, [-1]));
    } finally {
      await reader.close();
      await live.close();
    }
  });
});

describe("createStore", () => {
  it("opens a sqlite store by kind", async () => {
    const s = createStore({ kind: "sqlite", path: ":memory:" });
    await s.createRun(fixtureRun());
    expect(await s.listRuns()).toEqual([fixtureRun()]);
    await s.close();
  });

  it("names unknown kinds and missing paths", async () => {
    expect(() => createStore({ kind: "redis" })).toThrow("store.kind: unknown store kind 'redis' (known: sqlite, postgres)");
    expect(() => createStore({ kind: "toString" })).toThrow(/unknown store kind/);
    expect(() => createStore({ kind: "sqlite", path: "" })).toThrow("store.path: required for the sqlite store");
  });
});
