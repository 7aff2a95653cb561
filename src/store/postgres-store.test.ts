import { spawnSync } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import type { Call } from "../core/types.js";
import { conversationProgram, fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { dropTestSchema, POSTGRES_TEST_URL, postgresQuery, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import pg from "pg";
import { migratePostgres, POSTGRES_MIGRATIONS } from "./postgres-migrations.js";
import { PostgresTrajectoryStore, type PostgresStoreOptions } from "./postgres-store.js";
import { createStore, openStore } from "./registry.js";
import { describeTrajectoryStoreContract, TRICKY_LOGPROBS } from "./trajectory-store.contract.js";

const unreachable = await postgresUnreachable();
const url = POSTGRES_TEST_URL;

describe.skipIf(unreachable !== undefined)(`postgres store (${unreachable ?? url})`, () => {
  describeTrajectoryStoreContract(
    "postgres",
    () => {
      const schema = testSchemaName();
      return { open: () => PostgresTrajectoryStore.open({ url, schema }), dispose: () => dropTestSchema(schema) };
    },
    { persistent: true },
  );

  let schema: string;
  const opened: PostgresTrajectoryStore[] = [];
  const open = async (opts: Partial<PostgresStoreOptions> = {}): Promise<PostgresTrajectoryStore> => {
    const s = await PostgresTrajectoryStore.open({ url, schema, ...opts });
    opened.push(s);
    return s;
  };
  const versions = async (): Promise<number[]> =>
    (await postgresQuery<{ version: number }>(`SELECT version FROM ${schema}.arbor_schema_migrations ORDER BY version`)).map((r) => r.version);

  /** A run with one group of one active program `g-p0`. */
  async function oneProgram(store: PostgresTrajectoryStore): Promise<void> {
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g", "run-1", 1);
    await store.createGroup(g);
    await store.createProgram(fixtureProgram(g, 0));
  }

  beforeEach(() => {
    schema = testSchemaName();
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
    await dropTestSchema(schema);
  });

  describe("migrations", () => {
    it("applies each migration once and records its version; reopening applies nothing", async () => {
      await (await open()).close();
      expect(await versions()).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
      await Promise.all([open(), open(), open()]);
      expect(await versions()).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
    });

    it("applies only the missing migrations, each once, and refuses a schema newer than the build", async () => {
      await (await open()).close();
      const current = POSTGRES_MIGRATIONS.length;
      const next = [...POSTGRES_MIGRATIONS, { version: current + 1, description: "test column", sql: "ALTER TABLE runs ADD COLUMN note text" }];
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        expect(await migratePostgres(client as unknown as pg.PoolClient, schema, next)).toEqual({ applied: [current + 1], version: current + 1 });
        expect(await migratePostgres(client as unknown as pg.PoolClient, schema, next)).toEqual({ applied: [], version: current + 1 });
      } finally {
        await client.end();
      }
      expect(await versions()).toEqual(next.map((m) => m.version));
      await expect(open()).rejects.toThrow(new RegExp(`schema '${schema}' is at version ${current + 1}, newer than this build's ${current}`));
    });

    it("refuses a schema that holds other tables, and a bad schema name naming the field", async () => {
      await postgresQuery(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.t (x int)`);
      await expect(open()).rejects.toThrow(/has tables but no arbor_schema_migrations; not an Arbor store/);
      await expect(open({ schema: "Bad-Name" })).rejects.toThrow(/^schema: must be lower-case letters/);
    });
  });

  describe("idempotent writes", () => {
    it("a retried call write does not duplicate; the same id with other content is an error naming the call", async () => {
      const store = await open();
      await oneProgram(store);
      const call = { ...fixtureCall("g-p0", 0, TRICKY_LOGPROBS), tokenPolicyVersions: TRICKY_LOGPROBS.map(() => 3) };
      await store.recordCall(call);
      await store.recordCall(call);
      await Promise.all([store.recordCall(call), store.recordCall(call)]);
      expect((await store.getTrajectory("g-p0"))?.calls).toEqual([call]);
      expect(await postgresQuery(`SELECT id FROM ${schema}.calls`)).toHaveLength(1);
      await expect(store.recordCall({ ...call, outputText: "other" })).rejects.toThrow(/recordCall 'g-p0-c0': duplicate call id/);
      await expect(store.recordCall({ ...call, index: 1 })).rejects.toThrow(/recordCall 'g-p0-c0': duplicate call id/);
      expect((await store.stats("run-1")).calls).toBe(1);
    });

    it("a retried write of text with NUL characters (stored escaped) is still the same write", async () => {
      const s = await open();
      await oneProgram(s);
      const call = { ...fixtureCall("g-p0", 0, [-1]), outputText: "x\u0000y" };
      await s.recordCall(call);
      await s.recordCall(call);
      await s.endProgram("g-p0", { kind: "engine_error", detail: "\u0000" }, 5);
      await s.endProgram("g-p0", { kind: "engine_error", detail: "\u0000" }, 5);
      const t = await s.getTrajectory("g-p0");
      expect(t?.calls.map((c) => c.outputText)).toEqual(["x\u0000y"]);
      expect(t?.program.termination).toEqual({ kind: "engine_error", detail: "\u0000" });
    });

    it("two stores racing to record the same call record it once", async () => {
      const a = await open();
      const b = await open();
      await oneProgram(a);
      const calls = Array.from({ length: 20 }, (_, i) => fixtureCall("g-p0", i, [-1, -2]));
      await Promise.all([...calls.map((c) => a.recordCall(c)), ...calls.map((c) => b.recordCall(c))]);
      expect((await b.getTrajectory("g-p0"))?.calls).toEqual(calls);
    });

    it("a retried create, end or reward is a no-op; a different one is refused", async () => {
      const store = await open();
      await oneProgram(store);
      const p = fixtureProgram(fixtureGroup("g", "run-1", 1), 0);
      await store.createProgram(p);
      await expect(store.createProgram({ ...p, createdAt: 1 })).rejects.toThrow(/createProgram: program 'g-p0' already exists/);
      await store.endProgram("g-p0", { kind: "completed", detail: "done" }, 50);
      await store.endProgram("g-p0", { kind: "completed", detail: "done" }, 50);
      await expect(store.endProgram("g-p0", { kind: "completed" }, 50)).rejects.toThrow(/endProgram: program 'g-p0' already ended \(completed\)/);
      await store.setReward("g-p0", { total: 0.5, components: { outcome: 0.5 } });
      await store.setReward("g-p0", { total: 0.5, components: { outcome: 0.5 } });
      await expect(store.setReward("g-p0", { total: 1, components: {} })).rejects.toThrow(/already has a reward/);
      expect((await store.listGroups("run-1"))[0]?.programIds).toEqual(["g-p0"]);
      expect(await store.stats("run-1")).toMatchObject({ programs: 1, unfinished: 0, rewarded: 1, meanReward: 0.5 });
    });
  });

  describe("calls stored as deltas", () => {
    const rowsOf = (): Promise<unknown[]> =>
      postgresQuery(
        `SELECT idx, base_idx, prompt_shared, octet_length(prompt_token_ids) / 4 AS rest, messages_shared FROM ${schema}.calls ORDER BY idx`,
      );

    it("stores a program's calls as deltas over the last call it committed, and reads them back whole", async () => {
      const store = await open();
      const calls = await conversationProgram(store);
      for (const c of calls) await store.recordCall(c);
      // Call 1 starts with all of call 0's 53 tokens (prompt and output), call 2 (after a context reset) with 10 of
      // call 1's and only its system prompt; the first call of a program is whole.
      expect(await rowsOf()).toEqual([
        { idx: 0, base_idx: null, prompt_shared: 0, rest: 50, messages_shared: 0 },
        { idx: 1, base_idx: 0, prompt_shared: 53, rest: 1, messages_shared: 2 },
        { idx: 2, base_idx: 1, prompt_shared: 10, rest: 3, messages_shared: 1 },
        { idx: 3, base_idx: 2, prompt_shared: 16, rest: 1, messages_shared: 2 },
        { idx: 4, base_idx: 3, prompt_shared: 20, rest: 1, messages_shared: 4 },
      ]);
      expect((await store.getTrajectory("g1-p0"))?.calls).toEqual(calls);
      expect((await store.listTrajectories("run-1"))[0]?.calls).toEqual(calls);
      const promptTokens = calls.reduce((n, c) => n + c.promptTokenIds.length, 0);
      expect(await store.stats("run-1")).toMatchObject({ calls: 5, promptTokens });
    });

    it("an identical retry is a no-op whichever form either copy is stored in; other content under its id is refused", async () => {
      const a = await open();
      const calls = await conversationProgram(a);
      for (const c of calls) await a.recordCall(c);
      const b = await open();
      // Call 3 is stored over call 2; a retry from `a` (which now stores call 3 whole, as its last call is 4) and
      // one from `b` (which knows no call of the program) are the same call.
      await a.recordCall(calls[3] as Call);
      await b.recordCall(calls[3] as Call);
      await expect(b.recordCall({ ...(calls[3] as Call), promptTokenIds: [1, 2, 3] })).rejects.toThrow(/recordCall 'g1-p0-c3': duplicate call id/);
      // A row from before content hashes (stored whole, no hash) is compared column by column, as before.
      await postgresQuery(`UPDATE ${schema}.calls SET content_sha = NULL WHERE idx = 0`);
      await b.recordCall(calls[0] as Call);
      await expect(b.recordCall({ ...(calls[0] as Call), outputText: "other" })).rejects.toThrow(/recordCall 'g1-p0-c0': duplicate call id/);
      expect((await b.getTrajectory("g1-p0"))?.calls).toEqual(calls);
      expect(await rowsOf()).toHaveLength(5);
    });

    it("never stores a call over one it was refused", async () => {
      const a = await open();
      const b = await open();
      const calls = await conversationProgram(a);
      const [first, second] = calls as [Call, Call];
      await a.recordCall(first);
      // Another store records call 1; this store's own call 1 (other tokens) is refused. Its next call starts with
      // the refused call's tokens: stored over index 1 it would read back over the other store's tokens, wrong.
      const other: Call = { ...second, id: "other", outputTokenIds: [4, 5, 6] };
      await b.recordCall(other);
      const refused: Call = { ...second, outputTokenIds: [7, 8, 9] };
      await expect(a.recordCall(refused)).rejects.toThrow(/already has a call at index 1/);
      const next: Call = { ...second, id: "next", index: 2, promptTokenIds: [...first.promptTokenIds, ...first.outputTokenIds, 61, 7, 8, 9, 62] };
      await a.recordCall(next);
      expect((await a.getTrajectory("g1-p0"))?.calls).toEqual([first, other, next]);
      expect((await rowsOf())[2]).toMatchObject({ idx: 2, base_idx: 0, prompt_shared: 53 });
    });
  });

  describe("shared schema", () => {
    it("two store objects on one schema see each other's writes, and neither ends the other's live run", async () => {
      const a = await open();
      await oneProgram(a);
      const b = await open();
      expect(b.recovered).toEqual({ runs: [], programs: [] });
      expect((await b.getRun("run-1"))?.endedAt).toBeUndefined();
      await b.recordCall(fixtureCall("g-p0", 0, [-1]));
      await a.recordCall(fixtureCall("g-p0", 1, [-2]));
      expect((await a.getTrajectory("g-p0"))?.calls.map((c) => c.id)).toEqual(["g-p0-c0", "g-p0-c1"]);
      await a.endProgram("g-p0", { kind: "completed" }, 9);
      await expect(b.recordCall(fixtureCall("g-p0", 2, [-3]))).rejects.toThrow(/already ended \(completed\)/);
      expect(await b.stats("run-1")).toMatchObject({ calls: 2, unfinished: 0 });
    });

    it("two stores creating one group's programs at once, each several times, list each in the group once", async () => {
      const a = await open();
      const b = await open();
      await a.createRun(fixtureRun());
      const g = { ...fixtureGroup("g", "run-1", 8), programIds: [] };
      await b.createGroup(g);
      const programs = Array.from({ length: 8 }, (_, i) => fixtureProgram(fixtureGroup("g", "run-1", 8), i));
      // Each program created by both stores at once (a retry racing the first try), and by one of them twice.
      await Promise.all(programs.flatMap((p) => [a.createProgram(p), b.createProgram(p), a.createProgram(p)]));
      expect([...((await b.listGroups("run-1"))[0]?.programIds ?? [])].sort()).toEqual(programs.map((p) => p.id).sort());
      expect(await postgresQuery(`SELECT count(*)::int AS n FROM ${schema}.programs`)).toEqual([{ n: 8 }]);
    });

    it("commits the writes made in one turn as one batch (one connection checkout, one transaction)", async () => {
      const store = await open();
      await oneProgram(store);
      // Each batch checks out one connection and runs one transaction; a savepoint per write.
      const connects = vi.spyOn(pg.Pool.prototype, "connect");
      try {
        await Promise.all(Array.from({ length: 50 }, (_, i) => store.recordCall(fixtureCall("g-p0", i, [-1]))));
        expect(connects).toHaveBeenCalledTimes(1);
      } finally {
        connects.mockRestore();
      }
      expect((await store.stats("run-1")).calls).toBe(50);
    });

    it("refuses a write beyond maxPendingWrites at once, naming the limit", async () => {
      const store = await open({ maxPendingWrites: 3 });
      const queued = [store.createRun(fixtureRun("a")), store.createRun(fixtureRun("b")), store.createRun(fixtureRun("c"))];
      await expect(store.createRun(fixtureRun("d"))).rejects.toThrow(/createRun 'd': write queue is full \(maxPendingWrites 3 writes waiting to commit\)/);
      await Promise.all(queued);
      await store.createRun(fixtureRun("d"));
      expect((await store.listRuns()).map((r) => r.id)).toEqual(["a", "b", "c", "d"]);
    });
  });

  describe("connection errors", () => {
    it("connection refused is a clear error naming the url, with the password masked", async () => {
      const refused = "postgres://postgres:secret@127.0.0.1:1/test";
      const err = await PostgresTrajectoryStore.open({ url: refused, schema }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ArborError);
      expect((err as ArborError).code).toBe("store_unreachable");
      expect((err as Error).message).toMatch(/^postgres store postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/test \(schema arbor_test_\w+\): cannot connect: .*ECONNREFUSED/);
      expect((err as Error).message).not.toContain("secret");
    });

    it("writes and reads go on after the server ended the store's connections (nothing was committed on them)", async () => {
      const store = await open();
      await oneProgram(store);
      await store.recordCall(fixtureCall("g-p0", 0, [-1]));
      const ended = await postgresQuery<{ ok: boolean }>("SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1", [
        `arbor:${schema}`,
      ]);
      expect(ended.length).toBeGreaterThan(0);
      await store.recordCall(fixtureCall("g-p0", 1, [-2]));
      expect((await store.getTrajectory("g-p0"))?.calls.map((c) => c.index)).toEqual([0, 1]);
      await postgresQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [`arbor:${schema}`]);
      expect((await store.stats("run-1")).calls).toBe(2);
    });

    it("names bad options", async () => {
      await expect(open({ url: `${url}?options=-c%20search_path%3Dpublic` })).rejects.toThrow(/^url: the 'options' parameter is not supported/);
      await expect(PostgresTrajectoryStore.open({ url: "mysql://x", schema })).rejects.toThrow(/^url: must be a postgres:\/\/ or postgresql:\/\/ URL/);
      await expect(open({ poolSize: 0 })).rejects.toThrow("poolSize: must be an integer in [1, 256], got 0");
    });
  });

  describe("recovery on open", () => {
    const clock = { now: () => 777, setTimer: () => ({ cancel: () => undefined }), sleep: async () => undefined };

    it("ends the programs a killed run left active as aborted, with the reason, and gives the run an end time", async () => {
      const script = `
        import { PostgresTrajectoryStore } from "./src/store/postgres-store.ts";
        const s = await PostgresTrajectoryStore.open({ url: ${JSON.stringify(url)}, schema: ${JSON.stringify(schema)} });
        await s.createRun({ id: "dead", name: "dead", configJson: "{}", startedAt: 1 });
        await s.createGroup({ id: "g", runId: "dead", taskId: "t", programIds: [] });
        for (const i of [0, 1, 2]) await s.createProgram({ id: "p" + i, runId: "dead", taskId: "t", groupId: "g", sampleIndex: i, state: "active", createdAt: 2 });
        await s.endProgram("p2", { kind: "completed" }, 3);
        process.kill(process.pid, "SIGKILL");
      `;
      const root = new URL("../..", import.meta.url).pathname;
      const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: root, encoding: "utf8", timeout: 60_000 });
      expect(r.signal, r.stderr).toBe("SIGKILL");
      const store = await open({ clock });
      expect(store.recovered).toEqual({ runs: ["dead"], programs: ["p0", "p1"] });
      const [p0, , p2] = await store.listTrajectories("dead");
      expect(p0?.program).toMatchObject({ state: "terminated", endedAt: 777, termination: { kind: "aborted" } });
      expect(p0?.program.termination?.detail).toMatch(/^run 'dead' ended without finishing: its process \(pid \d+ on .+\) is gone/);
      expect(p2?.program.termination).toEqual({ kind: "completed" });
      expect((await store.getRun("dead"))?.endedAt).toBe(777);
      expect((await open()).recovered).toEqual({ runs: [], programs: [] });
    }, 60_000);

    it("ends a run on another host once its heartbeat is older than ownerTimeoutMs, not before", async () => {
      const a = await open();
      await oneProgram(a);
      await postgresQuery(`UPDATE ${schema}.run_owners SET host = 'elsewhere', heartbeat_at = now() - interval '100 seconds'`);
      expect((await open({ ownerTimeoutMs: 200_000 })).recovered).toEqual({ runs: [], programs: [] });
      const b = await open({ ownerTimeoutMs: 60_000, clock });
      expect(b.recovered).toEqual({ runs: ["run-1"], programs: ["g-p0"] });
      expect((await b.getTrajectory("g-p0"))?.program.termination?.detail).toMatch(/on elsewhere\) sent no heartbeat for 100 s \(ownerTimeoutMs 60000\)/);
      await expect(a.recordCall(fixtureCall("g-p0", 0, [-1]))).rejects.toThrow(/already ended \(aborted\)/);
    });

    it("the owner refreshes its runs' heartbeat every quarter of ownerTimeoutMs until the run finishes", async () => {
      const virtual = new VirtualClock(0);
      const a = await open({ ownerTimeoutMs: 60_000, clock: virtual });
      await oneProgram(a);
      const age = async (): Promise<number> =>
        (await postgresQuery<{ s: number }>(`SELECT extract(epoch FROM now() - heartbeat_at)::float8 AS s FROM ${schema}.run_owners`))[0]?.s ?? -1;
      await postgresQuery(`UPDATE ${schema}.run_owners SET heartbeat_at = now() - interval '1 hour'`);
      virtual.advance(14_999);
      expect(await age()).toBeGreaterThan(3000);
      virtual.advance(1);
      await vi.waitFor(async () => expect(await age()).toBeLessThan(60), { timeout: 10_000 });
      await a.finishRun("run-1", 5);
      expect(virtual.pendingTimers).toBe(1);
      virtual.advance(15_000);
      expect(virtual.pendingTimers).toBe(0);
    });
  });

  describe("registry", () => {
    it("opens a postgres store with openStore, and createStore names openStore", async () => {
      const store = await openStore({ kind: "postgres", url, schema });
      opened.push(store as PostgresTrajectoryStore);
      await store.createRun(fixtureRun());
      expect(await store.listRuns()).toEqual([fixtureRun()]);
      expect(() => createStore({ kind: "postgres", url, schema })).toThrow("store.kind: the postgres store opens asynchronously; open it with openStore");
    });

    it("names bad config fields as the config names them", async () => {
      await expect(openStore({ kind: "postgres" })).rejects.toThrow(/^store\.url: must be a postgres:\/\//);
      await expect(openStore({ kind: "postgres", url, schema: "x-y" })).rejects.toThrow(/^store\.schema: must be lower-case/);
      await expect(openStore({ kind: "postgres", url, schema, poolSize: 1.5 })).rejects.toThrow(/^store\.poolSize: must be an integer/);
    });
  });
});
