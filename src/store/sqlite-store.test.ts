import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { decodeFloat64s, decodeTokenIds } from "./codec.js";
import { createStore } from "./registry.js";
import { SQLITE_SCHEMA_VERSION, SqliteTrajectoryStore } from "./sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { describeTrajectoryStoreContract, TRICKY_LOGPROBS } from "./trajectory-store.contract.js";

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

  it("uses WAL, foreign keys and the exact binary encodings; a recorded call is visible to another connection at once", () => {
    const store = new SqliteTrajectoryStore(path);
    store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    store.createGroup(g);
    store.createProgram(fixtureProgram(g, 0));
    const call = { ...fixtureCall("g1-p0", 0, TRICKY_LOGPROBS), outputTokenIds: TRICKY_LOGPROBS.map((_, i) => 0x7fffffff - i) };
    store.recordCall(call);
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
      store.close();
    }
  });

  it("keeps a call's text-only and context-reset flags, and absent flags stay absent", () => {
    const store = new SqliteTrajectoryStore(path);
    store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    store.createGroup(g);
    store.createProgram(fixtureProgram(g, 0));
    const plain = fixtureCall("g1-p0", 0, [-0.5]);
    const textOnly = { ...fixtureCall("g1-p0", 1, []), promptTokenIds: [], outputTokenIds: [], trainable: false as const, contextReset: true as const };
    store.recordCall(plain);
    store.recordCall(textOnly);
    store.close();
    const again = new SqliteTrajectoryStore(path);
    try {
      const calls = again.getTrajectory("g1-p0")?.calls ?? [];
      expect(calls).toEqual([plain, textOnly]);
      expect("trainable" in (calls[0] as object)).toBe(false);
    } finally {
      again.close();
    }
  });

  it("upgrades a version-1 file in place: old calls read back as trainable", () => {
    const store = new SqliteTrajectoryStore(path);
    store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    store.createGroup(g);
    store.createProgram(fixtureProgram(g, 0));
    const call = fixtureCall("g1-p0", 0, [-0.25]);
    store.recordCall(call);
    store.close();
    // Turn the file back into what version 1 wrote: no flag columns.
    const db = new Database(path);
    db.exec(
      "ALTER TABLE calls DROP COLUMN trainable; ALTER TABLE calls DROP COLUMN context_reset; ALTER TABLE calls DROP COLUMN token_policy_versions; ALTER TABLE calls DROP COLUMN served_model; UPDATE schema_version SET version = 1;",
    );
    db.close();
    const upgraded = new SqliteTrajectoryStore(path);
    try {
      expect(upgraded.getTrajectory("g1-p0")?.calls).toEqual([call]);
    } finally {
      upgraded.close();
    }
    const check = new Database(path, { readonly: true });
    expect(check.prepare("SELECT version FROM schema_version").get()).toEqual({ version: SQLITE_SCHEMA_VERSION });
    check.close();
  });

  it("keeps a call's per-token policy versions exactly, and refuses a list that does not match the output", () => {
    const store = new SqliteTrajectoryStore(path);
    store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    store.createGroup(g);
    store.createProgram(fixtureProgram(g, 0));
    const resumed = { ...fixtureCall("g1-p0", 0, [-0.5, -1, -2]), policyVersion: 4, tokenPolicyVersions: [3, 3, 4] };
    store.recordCall(resumed);
    const short = { ...fixtureCall("g1-p0", 1, [-0.5, -1]), tokenPolicyVersions: [3] };
    expect(() => store.recordCall(short)).toThrow(/call 'g1-p0-c1': 1 tokenPolicyVersions for 2 output tokens/);
    const negative = { ...fixtureCall("g1-p0", 1, [-0.5]), tokenPolicyVersions: [-1] };
    expect(() => store.recordCall(negative)).toThrow(/tokenPolicyVersions\[0\]/);
    const plain = fixtureCall("g1-p0", 1, [-0.25]);
    store.recordCall(plain);
    store.close();
    const again = new SqliteTrajectoryStore(path);
    try {
      const calls = again.getTrajectory("g1-p0")?.calls;
      expect(calls).toEqual([resumed, plain]);
      expect("tokenPolicyVersions" in (calls![1] as object)).toBe(false);
    } finally {
      again.close();
    }
  });

  it("upgrades a version-2 file in place: old calls read back without per-token versions and new ones keep theirs", () => {
    const store = new SqliteTrajectoryStore(path);
    store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    store.createGroup(g);
    store.createProgram(fixtureProgram(g, 0));
    const old = { ...fixtureCall("g1-p0", 0, [-0.25]), contextReset: true as const };
    store.recordCall(old);
    store.close();
    // Turn the file back into what version 2 wrote: no per-token versions column.
    const db = new Database(path);
    db.exec("ALTER TABLE calls DROP COLUMN token_policy_versions; ALTER TABLE calls DROP COLUMN served_model; UPDATE schema_version SET version = 2;");
    db.close();
    const upgraded = new SqliteTrajectoryStore(path);
    const resumed = { ...fixtureCall("g1-p0", 1, [-1, -2]), tokenPolicyVersions: [2, 3] };
    try {
      expect(upgraded.getTrajectory("g1-p0")?.calls).toEqual([old]);
      upgraded.recordCall(resumed);
    } finally {
      upgraded.close();
    }
    const reopened = new SqliteTrajectoryStore(path);
    try {
      expect(reopened.getTrajectory("g1-p0")?.calls).toEqual([old, resumed]);
    } finally {
      reopened.close();
    }
    const check = new Database(path, { readonly: true });
    expect(check.prepare("SELECT version FROM schema_version").get()).toEqual({ version: SQLITE_SCHEMA_VERSION });
    check.close();
  });

  it("keeps each call's served model name (version 4), and upgrades a version-3 file in place", () => {
    const store = new SqliteTrajectoryStore(path);
    store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 1);
    store.createGroup(g);
    store.createProgram(fixtureProgram(g, 0));
    const old = fixtureCall("g1-p0", 0, [-0.25]);
    store.recordCall(old);
    store.close();
    const db = new Database(path);
    db.exec("ALTER TABLE calls DROP COLUMN served_model; UPDATE schema_version SET version = 3;");
    db.close();
    const upgraded = new SqliteTrajectoryStore(path);
    const served = { ...fixtureCall("g1-p0", 1, [-1]), servedModel: "calc-policy" };
    try {
      upgraded.recordCall(served);
      expect(upgraded.getTrajectory("g1-p0")?.calls).toEqual([old, served]);
    } finally {
      upgraded.close();
    }
  });

  it("refuses a file with another schema version", () => {
    new SqliteTrajectoryStore(path).close();
    const db = new Database(path);
    db.prepare("UPDATE schema_version SET version = 999").run();
    db.close();
    expect(() => new SqliteTrajectoryStore(path)).toThrow(new RegExp(`schema version 999, this build expects ${SQLITE_SCHEMA_VERSION}`));
  });

  it("refuses a database that is not an Arbor store, and a file that is not a database", () => {
    const db = new Database(path);
    db.exec("CREATE TABLE t (x)");
    db.close();
    expect(() => new SqliteTrajectoryStore(path)).toThrow(/not an Arbor store/);
    const junk = join(dir, "junk.sqlite");
    writeFileSync(junk, "this is not sqlite at all, just some text that is long enough to have a header".repeat(20));
    expect(() => new SqliteTrajectoryStore(junk)).toThrow(ArborError);
  });
});

describe("createStore", () => {
  it("opens a sqlite store by kind", () => {
    const s = createStore({ kind: "sqlite", path: ":memory:" });
    s.createRun(fixtureRun());
    expect(s.listRuns()).toEqual([fixtureRun()]);
    s.close();
  });

  it("names unknown kinds and missing paths", () => {
    expect(() => createStore({ kind: "redis" })).toThrow("store.kind: unknown store kind 'redis' (known: sqlite)");
    expect(() => createStore({ kind: "toString" })).toThrow(/unknown store kind/);
    expect(() => createStore({ kind: "sqlite", path: "" })).toThrow("store.path: required for the sqlite store");
  });
});
