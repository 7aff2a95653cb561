import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { REDIS_TEST_URL, redisUnreachable } from "../../testing/redis-test.js";
import { RedisStatePool } from "./redis-state-pool.js";

const unreachable = await redisUnreachable();
if (unreachable) console.warn(`skipping the Redis KV pool tests: ${unreachable}`);

const open: RedisStatePool[] = [];
/** A pool with a fresh name, so tests never see each other's states. */
function pool(capacityBytes: number, name = `test-${randomBytes(6).toString("hex")}`): RedisStatePool {
  const p = new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes, name });
  open.push(p);
  return p;
}
const blob = (n: number, fill = 7): Buffer => Buffer.alloc(n, fill);

afterEach(async () => {
  for (const p of open.splice(0)) {
    await p.clear().catch(() => undefined);
    await p.close();
  }
});

describe.skipIf(unreachable !== undefined)("RedisStatePool", () => {
  it("stores a state with its token ids and compat string; another client of the same pool reads it", async () => {
    const a = pool(10_000);
    const name = a.where.split("{")[1]?.split("}")[0] as string;
    const b = pool(10_000, name);
    const e = await a.put("p1", [1, 2, 3], "model.gguf|sequences=2", blob(100, 9));
    expect(e).toEqual({ key: "p1", tokenIds: [1, 2, 3], bytes: 100, compat: "model.gguf|sequences=2" });
    const got = await b.get("p1");
    expect(got?.entry).toEqual(e);
    expect(got?.data.equals(blob(100, 9))).toBe(true);
    expect(await b.peek("p1")).toEqual(e);
    expect(await b.get("nope")).toBeUndefined();
    expect(await a.stats()).toMatchObject({ entries: 1, usedBytes: 100, puts: 1, hits: 1, misses: 1, evictions: 0, capacityBytes: 10_000 });
  });

  it("keeps binary data intact", async () => {
    const p = pool(100_000);
    const data = randomBytes(50_000);
    await p.put("bin", [5], "c", data);
    expect((await p.get("bin"))?.data.equals(data)).toBe(true);
  });

  it("replacing a key frees its old bytes", async () => {
    const p = pool(250);
    await p.put("k", [1], "c", blob(200));
    await p.put("k", [1, 2], "c", blob(200));
    expect((await p.peek("k"))?.tokenIds).toEqual([1, 2]);
    expect(await p.stats()).toMatchObject({ entries: 1, usedBytes: 200, evictions: 0 });
  });

  it("evicts least recently used states to make room", async () => {
    const p = pool(300);
    await p.put("a", [1], "c", blob(100));
    await p.put("b", [2], "c", blob(100));
    await p.put("c", [3], "c", blob(100));
    await p.get("a"); // a becomes the most recent: b is the oldest now
    await p.put("d", [4], "c", blob(150));
    expect((await p.keys()).sort()).toEqual(["a", "d"]);
    expect(await p.stats()).toMatchObject({ usedBytes: 250, evictions: 2 });
    expect(await p.get("b")).toBeUndefined();
  });

  it("refuses a state larger than the capacity with a clear error and keeps what it holds", async () => {
    const p = pool(100);
    await p.put("a", [1], "c", blob(50));
    await expect(p.put("big", [1], "c", blob(101))).rejects.toThrow(/KV pool redis:\/\/.* is full \(limit 100 bytes\): state for big needs 101 bytes \(50 in use\)/);
    expect(await p.keys()).toEqual(["a"]);
    expect((await p.stats()).usedBytes).toBe(50);
  });

  it("take removes the state in the same step: a handed-off KV is loaded once", async () => {
    const p = pool(1000);
    await p.put("h", [1, 2], "c", blob(40));
    const first = await p.get("h", { take: true });
    expect(first?.entry.tokenIds).toEqual([1, 2]);
    expect(await p.get("h", { take: true })).toBeUndefined();
    expect(await p.stats()).toMatchObject({ entries: 0, usedBytes: 0 });
  });

  it("delete frees the bytes; clear removes the whole pool", async () => {
    const p = pool(1000);
    await p.put("a", [1], "c", blob(10));
    await p.put("b", [1], "c", blob(20));
    expect(await p.delete("a")).toBe(true);
    expect(await p.delete("a")).toBe(false);
    expect((await p.stats()).usedBytes).toBe(20);
    await p.clear();
    expect(await p.keys()).toEqual([]);
    expect((await p.stats()).usedBytes).toBe(0);
  });

  it("names the field of a bad option and the pool of a failed command", async () => {
    expect(() => new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 0 })).toThrow(/kvPool.capacityBytes must be a positive number, got 0/);
    expect(() => new RedisStatePool({ url: "http://x", capacityBytes: 1 })).toThrow(/kvPool.url must be a redis:\/\/ or rediss:\/\/ URL/);
    expect(() => new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 1, name: "a b" })).toThrow(/kvPool.name must be/);
    const dead = new RedisStatePool({ url: "redis://127.0.0.1:1", capacityBytes: 100, connectTimeoutMs: 500 });
    try {
      await expect(dead.connect()).rejects.toThrow(/KV pool redis:\/\/127.0.0.1:1 arbor:kv:\{default\}: connect failed/);
    } finally {
      await dead.close();
    }
    const p = pool(100);
    await p.close();
    await expect(p.get("a")).rejects.toThrow(/is closed/);
  });
});
