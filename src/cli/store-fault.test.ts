// Fault test (issue 16 item 6): the Postgres store's connection is cut for ~3 s mid-run, through a TCP proxy the
// test controls. After it, every program of the run has ended with a recorded termination, no call is recorded
// twice, each iteration's exported batch holds no sample twice and every trajectory's calls, and rewards are
// recorded — read back from the store directly, not through the proxy. The store's own behaviour under the same
// cut (a call being recorded, a read) is checked on a store object alone.
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readSamplesJsonl } from "../batch/export-jsonl.js";
import { parseRunConfig } from "../core/config.js";
import { PostgresTrajectoryStore } from "../store/postgres-store.js";
import { dropTestSchema, POSTGRES_TEST_URL, postgresQuery, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { startTcpFaultProxy, type TcpFaultProxy } from "../testing/tcp-fault-proxy.js";
import { runIteration, type RunSummary } from "./run.js";
import { iterationTrajectories } from "../testing/iteration-trajectories.js";

const UNREACHABLE = await postgresUnreachable();
const CUT_MS = 3000;

/** The test server's URL with its host and port replaced by the proxy's. */
function throughProxy(proxy: TcpFaultProxy): string {
  const u = new URL(POSTGRES_TEST_URL);
  u.hostname = "127.0.0.1";
  u.port = String(proxy.port);
  return u.toString();
}

async function startProxy(): Promise<TcpFaultProxy> {
  const u = new URL(POSTGRES_TEST_URL);
  return startTcpFaultProxy(u.hostname, Number(u.port || 5432));
}

describe.skipIf(UNREACHABLE !== undefined)(`store connection cut mid-run${UNREACHABLE ? ` (skipped: ${UNREACHABLE})` : ""}`, () => {
  describe("arbor run, two iterations, the store cut for 3 s while the first iteration's programs run", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-store-fault-"));
    chmodSync(dir, 0o755);
    const schema = testSchemaName();
    let proxy: TcpFaultProxy;
    let summary: RunSummary | undefined;
    let failure: unknown;
    let cutAfter: string | undefined;
    let cutDone: Promise<void> | undefined;
    const done: string[] = [];

    beforeAll(async () => {
      proxy = await startProxy();
      const cfg = parseRunConfig(
        smallRlConfig(dir, "pg-fault", { env: { name: "calc", tasks: 2, seed: 7 }, iterations: 2, store: { kind: "postgres", url: throughProxy(proxy), schema } }),
      );
      try {
        summary = await runIteration(cfg, {
          progress: false,
          runId: "pg-fault",
          onProgramDone: (p) => {
            done.push(p.programId);
            // The first program's end: the other programs of the iteration are still running.
            if (cutDone === undefined) {
              cutAfter = p.programId;
              cutDone = proxy.cut(CUT_MS);
            }
          },
        });
      } catch (e) {
        failure = e;
      }
      await cutDone;
    }, 55_000);
    afterAll(async () => {
      await proxy?.close();
      await dropTestSchema(schema);
    });

    it("cut the store's connections while programs ran, and the run completed", () => {
      expect(cutAfter).toBeDefined();
      // The cut came after the first program's end: the other 15 programs of the run ended after it.
      expect(done[0]).toBe(cutAfter);
      expect(done).toHaveLength(16);
      expect(proxy.connectionsCut).toBeGreaterThan(0);
      // The store tried to reach the server during the outage (and was refused), rather than waiting idly.
      expect(proxy.connectionsRefused).toBeGreaterThan(0);
      // The run must ride out a short outage: nothing in it is lost, so there is no reason to fail.
      expect(failure).toBeUndefined();
      expect(summary?.iterations).toHaveLength(2);
    });

    it("read back directly: every program ended with a termination, no call twice, rewards recorded, batches whole and without duplicates", async () => {
      const store = await PostgresTrajectoryStore.open({ url: POSTGRES_TEST_URL, schema });
      try {
        const runs = (await store.listRuns()).map((r) => r.id).sort();
        // One run; its two iterations' groups belong to it.
        expect(runs).toEqual(["pg-fault"]);
        const allCallIds = await postgresQuery<{ id: string }>(`SELECT id FROM ${schema}.calls`);
        expect(new Set(allCallIds.map((r) => r.id)).size).toBe(allCallIds.length);
        expect((await store.stats("pg-fault")).unfinished).toBe(0);
        for (const k of [0, 1]) {
          const trajectories = await iterationTrajectories(store, "pg-fault", k + 1);
          expect(trajectories).toHaveLength(8);
          for (const t of trajectories) {
            expect(t.program.termination?.kind, `program ${t.program.id}`).toBeDefined();
            expect(t.reward, `reward of ${t.program.id}`).toBeDefined();
            expect(t.calls.length).toBeGreaterThan(0);
            expect(t.calls.map((c) => c.index)).toEqual(t.calls.map((_, i) => i));
          }
          const batchPath = summary?.iterations[k]?.batchPath ?? join(dir, "pg-fault", `batch-it${k + 1}.jsonl`);
          const samples = await readSamplesJsonl(batchPath);
          expect(new Set(samples.map((s) => s.id)).size).toBe(samples.length);
          const inBatch = samples.flatMap((s) => s.callIds);
          expect(new Set(inBatch).size).toBe(inBatch.length);
          // Every trajectory's calls are in the batch, and the batch holds no call the store does not.
          const stored = trajectories.flatMap((t) => t.calls.filter((c) => c.trainable !== false).map((c) => c.id));
          expect([...inBatch].sort()).toEqual([...stored].sort());
        }
      } finally {
        await store.close();
      }
    });
  });

  describe("the store alone, through the proxy", () => {
    let proxy: TcpFaultProxy;
    let schema: string;
    const opened: PostgresTrajectoryStore[] = [];
    const open = async (reconnectMs?: number): Promise<PostgresTrajectoryStore> => {
      const s = await PostgresTrajectoryStore.open({ url: throughProxy(proxy), schema, ...(reconnectMs !== undefined ? { reconnectMs } : {}) });
      opened.push(s);
      return s;
    };
    /** A run with one group of one active program `g-p0`, and its first call recorded (the pool has live connections). */
    async function oneProgram(store: PostgresTrajectoryStore): Promise<string> {
      await store.createRun(fixtureRun());
      const g = fixtureGroup("g", "run-1", 1);
      await store.createGroup(g);
      await store.createProgram(fixtureProgram(g, 0));
      await store.recordCall(fixtureCall("g-p0", 0, [-0.5]));
      return "g-p0";
    }
    const directCalls = (): Promise<{ id: string }[]> => postgresQuery<{ id: string }>(`SELECT id FROM ${schema}.calls ORDER BY idx`);

    beforeAll(async () => {
      proxy = await startProxy();
    });
    afterAll(async () => {
      await proxy?.close();
    });
    beforeEach(() => {
      schema = testSchemaName();
    });
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((s) => s.close().catch(() => undefined)));
      await dropTestSchema(schema);
    });

    it("calls recorded while the connection is cut are queued, retried and made once each; the program ends and is rewarded", async () => {
      const store = await open();
      const id = await oneProgram(store);
      const refusedBefore = proxy.connectionsRefused;
      const back = proxy.cut(1500);
      // As the gateway does: record the program's calls as they are answered, while the store is unreachable.
      const writes = [1, 2, 3].map((i) => store.recordCall(fixtureCall(id, i, [-0.25, -1])));
      await Promise.all([...writes, back]);
      await store.endProgram(id, { kind: "completed" }, 9000);
      await store.setReward(id, { total: 1, components: { outcome: 1 } });
      expect(proxy.connectionsRefused).toBeGreaterThan(refusedBefore);
      expect((await directCalls()).map((r) => r.id)).toEqual([0, 1, 2, 3].map((i) => `${id}-c${i}`));
      const direct = await PostgresTrajectoryStore.open({ url: POSTGRES_TEST_URL, schema });
      try {
        const t = await direct.getTrajectory(id);
        expect(t?.program.termination?.kind).toBe("completed");
        expect(t?.reward?.total).toBe(1);
      } finally {
        await direct.close();
      }
    });

    it("a read while the connection is cut waits for the server and answers", async () => {
      const store = await open();
      const id = await oneProgram(store);
      const back = proxy.cut(1500);
      const [trajectories] = await Promise.all([store.listTrajectories("run-1"), back]);
      expect(trajectories.map((t) => [t.program.id, t.calls.map((c) => c.id)])).toEqual([[id, [`${id}-c0`]]]);
      expect((await store.stats("run-1")).calls).toBe(1);
    });

    it("an outage longer than reconnectMs fails the write and the read with an error naming the store, and nothing half-made is left", async () => {
      const store = await open(300);
      const id = await oneProgram(store);
      const back = proxy.cut(2000);
      const label = `postgres store ${throughProxy(proxy)} (schema ${schema})`;
      await expect(store.recordCall(fixtureCall(id, 1, [-1]))).rejects.toThrow(`${label}: recordCall '${id}-c1': cannot connect (tried for`);
      await expect(store.getTrajectory(id)).rejects.toThrow(`${label}: getTrajectory: cannot connect (tried for`);
      await back;
      // Once the server answers again the store works: the refused call can be recorded, once.
      await store.recordCall(fixtureCall(id, 1, [-1]));
      expect((await directCalls()).map((r) => r.id)).toEqual([`${id}-c0`, `${id}-c1`]);
    });
  });
});
