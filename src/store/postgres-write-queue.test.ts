import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropTestSchema, POSTGRES_TEST_URL, postgresQuery, postgresUnreachable, testSchemaName } from "../testing/postgres-test-db.js";
import { VirtualClock } from "../core/clock.js";
import { PgWriteQueue, Refused } from "./postgres-write-queue.js";

const unreachable = await postgresUnreachable();

describe.skipIf(unreachable !== undefined)(`PgWriteQueue (${unreachable ?? POSTGRES_TEST_URL})`, () => {
  let schema: string;
  let pools: pg.Pool[];
  const pool = (): pg.Pool => {
    const p = new pg.Pool({ connectionString: POSTGRES_TEST_URL, max: 2, options: `-c search_path=${schema}` });
    p.on("error", () => undefined);
    p.on("connect", (client) => client.on("error", () => undefined));
    pools.push(p);
    return p;
  };
  const rows = async (): Promise<{ k: string; v: number }[]> => postgresQuery(`SELECT k, v FROM ${schema}.kv ORDER BY k`);

  beforeEach(async () => {
    schema = testSchemaName();
    pools = [];
    await postgresQuery(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.kv (k text PRIMARY KEY, v int NOT NULL)`);
  });
  afterEach(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await dropTestSchema(schema);
  });

  it("commits a batch without a savepoint per write while no write fails", async () => {
    const q = new PgWriteQueue(pool(), "test store");
    const sent: string[] = [];
    const put = (k: string, v: number) =>
      q.write(`put ${k}`, async (c) => {
        // From the first write on, every statement of the batch on this connection (the queue's own included).
        if (sent.length === 0) {
          const query = c.query.bind(c) as (text: string, values?: unknown[]) => Promise<unknown>;
          (c as unknown as { query: typeof query }).query = (text, values) => (sent.push(text), query(text, values));
        }
        await c.query("INSERT INTO kv VALUES ($1, $2)", [k, v]);
      });
    await Promise.all([put("a", 1), put("b", 2), put("c", 3)]);
    expect(sent).toEqual([...Array(3).fill("INSERT INTO kv VALUES ($1, $2)"), "COMMIT"]);
    expect(await rows()).toHaveLength(3);
  });

  it("a write failing in a batch is undone alone: the batch runs again with a savepoint around each write", async () => {
    const q = new PgWriteQueue(pool(), "test store");
    const runs = { a: 0, b: 0, c: 0 };
    const put = (k: "a" | "b" | "c", v: number, refuse = false) =>
      q.write(`put ${k}`, async (c) => {
        runs[k]++;
        await c.query("INSERT INTO kv VALUES ($1, $2)", [k, v]);
        if (refuse) throw new Refused(`refused: ${k}`);
      });
    const settled = await Promise.allSettled([put("a", 1), put("b", 2, true), put("c", 3)]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/test store: refused: b/);
    // The first run stopped at the failing write; the second ran every write once more.
    expect(runs).toEqual({ a: 2, b: 2, c: 1 });
    expect(await rows()).toEqual([
      { k: "a", v: 1 },
      { k: "c", v: 3 },
    ]);
    // A batch of one failing write is rolled back, not run again.
    await expect(put("b", 2, true)).rejects.toThrow(/refused: b/);
    expect(runs.b).toBe(3);
    expect(await rows()).toHaveLength(2);
  });

  it("runs a batch again when its connection was lost before COMMIT, so each write is made once", async () => {
    const q = new PgWriteQueue(pool(), "test store");
    let attempts = 0;
    const writes = [
      q.write("put a", async (c) => {
        await c.query("INSERT INTO kv VALUES ('a', 1)");
      }),
      q.write("refused", async () => {
        throw new Refused("refused: no");
      }),
      q.write("put b", async (c) => {
        attempts++;
        // The server ends this very connection mid-batch, the first time only.
        if (attempts === 1) await c.query("SELECT pg_terminate_backend(pg_backend_pid())");
        await c.query("INSERT INTO kv VALUES ('b', 2)");
      }),
    ];
    const settled = await Promise.allSettled(writes);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/test store: refused: no/);
    expect(attempts).toBe(2);
    expect(await rows()).toEqual([
      { k: "a", v: 1 },
      { k: "b", v: 2 },
    ]);
  });

  /**
   * Make this pooled connection lose its COMMIT once: `sent` — the COMMIT reaches the server (and
   * commits) but its answer is lost with the connection; not sent — the connection breaks first.
   */
  function loseCommit(c: pg.PoolClient, sent: boolean): void {
    const client = c as unknown as { query: (text: unknown, ...rest: unknown[]) => Promise<unknown>; connection: { stream: { destroy(): void } } };
    const orig = client.query.bind(c);
    client.query = async (text, ...rest) => {
      if (text !== "COMMIT") return orig(text, ...rest);
      client.query = orig;
      if (sent) await orig("COMMIT");
      client.connection.stream.destroy();
      throw new Error("Connection terminated unexpectedly");
    };
  }

  it("a batch whose COMMIT answer was lost asks the server: committed, so it is not run again", async () => {
    const q = new PgWriteQueue(pool(), "test store");
    let attempts = 0;
    await q.write("put a", async (c) => {
      attempts++;
      await c.query("INSERT INTO kv VALUES ('a', 1)");
      if (attempts === 1) loseCommit(c, true);
    });
    expect(attempts).toBe(1);
    expect(await rows()).toEqual([{ k: "a", v: 1 }]);
  });

  it("a batch whose connection broke as it was to COMMIT asks the server: aborted, so it is run again, once", async () => {
    const q = new PgWriteQueue(pool(), "test store");
    let attempts = 0;
    await q.write("put a", async (c) => {
      attempts++;
      await c.query("INSERT INTO kv VALUES ('a', 1)");
      if (attempts === 1) loseCommit(c, false);
    });
    expect(attempts).toBe(2);
    expect(await rows()).toEqual([{ k: "a", v: 1 }]);
  });

  it("a server that cannot be reached for reconnectMs fails the batch, saying for how long it tried", async () => {
    // Nothing listens on port 1: every connect is refused at once.
    const dead = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/test", max: 1 });
    pools.push(dead);
    const clock = new VirtualClock(0);
    const q = new PgWriteQueue(dead, "test store", { reconnectMs: 2000, clock });
    const w = q.write("put a", async () => undefined);
    const settled = w.then(
      () => "made",
      (e: Error) => e.message,
    );
    // Drive the virtual clock through the backoff until the write settles.
    let outcome: string | undefined;
    void settled.then((m) => (outcome = m));
    for (let i = 0; i < 200 && outcome === undefined; i++) {
      await new Promise((r) => setImmediate(r));
      clock.advance(50);
    }
    expect(outcome).toMatch(/^test store: put a: cannot connect \(tried for \d+ ms\): .*ECONNREFUSED/);
    expect(() => new PgWriteQueue(dead, "s", { reconnectMs: -1 })).toThrow("reconnectMs: must be an integer >= 0, got -1");
  });

  it("gives up after maxBatchAttempts, naming the write and the attempts", async () => {
    const q = new PgWriteQueue(pool(), "test store", { maxBatchAttempts: 2 });
    const w = q.write("put a", async (c) => {
      await c.query("INSERT INTO kv VALUES ('a', 1)");
      await c.query("SELECT pg_terminate_backend(pg_backend_pid())");
    });
    await expect(w).rejects.toThrow(/^test store: put a: terminating connection due to administrator command \(after 2 attempts\)/);
    expect(await rows()).toEqual([]);
  });

  it("runs again the batch that lost a deadlock, so both writers' writes are made", async () => {
    await postgresQuery(`INSERT INTO ${schema}.kv VALUES ('x', 0), ('y', 0)`);
    const a = new PgWriteQueue(pool(), "a");
    const b = new PgWriteQueue(pool(), "b");
    // Opposite lock orders with a pause between: the server's deadlock detector aborts one of them.
    const crossed = (first: string, second: string) => async (c: pg.PoolClient) => {
      await c.query("UPDATE kv SET v = v + 1 WHERE k = $1", [first]);
      await c.query("SELECT pg_sleep(0.3)");
      await c.query("UPDATE kv SET v = v + 1 WHERE k = $1", [second]);
    };
    await Promise.all([a.write("a", crossed("x", "y")), b.write("b", crossed("y", "x"))]);
    expect(await rows()).toEqual([
      { k: "x", v: 2 },
      { k: "y", v: 2 },
    ]);
  });

  it("refuses a write beyond maxPendingWrites, and a bad option, naming them", async () => {
    expect(() => new PgWriteQueue(pool(), "s", { maxBatchWrites: 0 })).toThrow("maxBatchWrites: must be an integer >= 1, got 0");
    const q = new PgWriteQueue(pool(), "s", { maxPendingWrites: 1 });
    const first = q.write("one", async () => undefined);
    await expect(q.write("two", async () => undefined)).rejects.toThrow("s: two: write queue is full (maxPendingWrites 1 writes waiting to commit)");
    await first;
  });
});
