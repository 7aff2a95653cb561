// The global KV pool as an engine's L3 tier, on the Redis pool (two tiers = two engine processes):
// what one tier puts another learns of by prefetch and takes by read; a stale index misses; delete
// and close behave as the runner needs.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import { REDIS_TEST_URL, redisUnreachable } from "../../testing/redis-test.js";
import { PooledStateTier } from "./pooled-state-tier.js";
import { RedisStatePool } from "./redis-state-pool.js";

const unreachable = await redisUnreachable();

const pools: RedisStatePool[] = [];
/** Two tiers over two clients of one fresh pool, as two engine processes would have. */
function twoTiers(): [PooledStateTier, PooledStateTier, RedisStatePool] {
  const name = `test-${randomBytes(6).toString("hex")}`;
  const [pa, pb] = [0, 1].map(() => new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 1_000_000, name })) as [RedisStatePool, RedisStatePool];
  pools.push(pa, pb);
  return [new PooledStateTier(pa), new PooledStateTier(pb), pa];
}
const writer = (bytes: Buffer) => (path: string) => writeFile(path, bytes);

afterEach(async () => {
  for (const p of pools.splice(0)) {
    await p.clear().catch(() => undefined);
    await p.close();
  }
});

describe.skipIf(unreachable !== undefined)(`PooledStateTier${unreachable ? ` (skipped: ${unreachable})` : ""}`, () => {
  it("a state one engine puts is learnt by the other's prefetch and taken by its read, once", async () => {
    const [a, b, pool] = twoTiers();
    const entry = await a.put("prog", [1, 2, 3], "m|sequences=2", writer(Buffer.from("state-bytes")));
    expect(entry).toEqual({ key: "prog", tokenIds: [1, 2, 3], bytes: 11, compat: "m|sequences=2" });
    expect(a.peek("prog")).toEqual(entry);
    // Stored under its own namespace in the pool: handoff keys cannot collide with it.
    expect(await pool.peek("program:prog")).toMatchObject({ tokenIds: [1, 2, 3] });

    expect(b.peek("prog")).toBeUndefined();
    expect(await b.prefetch("prog")).toEqual(entry);
    expect(b.longestPrefix([1, 2, 3, 4], "m|sequences=2")).toEqual(entry);
    expect(b.longestPrefix([1, 2, 3, 4], "other")).toBeUndefined();
    let seen: string | undefined;
    const got = await b.read("prog", async (path, e) => {
      seen = path;
      expect(e).toEqual(entry);
      return (await readFile(path)).toString();
    });
    expect(got).toBe("state-bytes");
    expect(existsSync(seen as string)).toBe(false);
    expect(b.peek("prog")).toBeUndefined();
    expect(await pool.peek("program:prog")).toBeUndefined();

    // a's index is stale now: its read misses, and a prefetch forgets the entry.
    expect(a.peek("prog")).toBeDefined();
    expect(await a.read("prog", async () => "loaded")).toBeUndefined();
    await a.put("prog2", [5], "m", writer(Buffer.from("x")));
    await b.prefetch("prog2");
    await b.read("prog2", async () => undefined);
    expect(await a.prefetch("prog2")).toBeUndefined();
    expect(a.peek("prog2")).toBeUndefined();
    expect(a.stats()).toMatchObject({ entries: 0, puts: 2, hits: 0, misses: 1 });
    expect(b.stats()).toMatchObject({ hits: 2, misses: 0 });
  });

  it("delete forgets the state and removes it from the pool; close keeps the pool's states for others", async () => {
    const [a, b, pool] = twoTiers();
    await a.put("gone", [1], "m", writer(Buffer.from("1")));
    expect(a.delete("gone")).toBe(true);
    expect(a.delete("gone")).toBe(false);
    for (let i = 0; i < 100 && (await pool.peek("program:gone")); i++) await new Promise((r) => setTimeout(r, 5));
    expect(await pool.peek("program:gone")).toBeUndefined();

    await a.put("kept", [2], "m", writer(Buffer.from("2")));
    a.close();
    expect(a.keys()).toEqual([]);
    await expect(a.put("late", [3], "m", writer(Buffer.from("3")))).rejects.toMatchObject({ code: "closed" });
    expect(await b.prefetch("kept")).toMatchObject({ tokenIds: [2] });
  });
});
