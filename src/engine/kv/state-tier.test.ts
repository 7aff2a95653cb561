import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { L2StateTier, L3StateTier, type KvStateTier } from "./state-tier.js";

const writer = (bytes: number) => async (path: string) => writeFileSync(path, Buffer.alloc(bytes, 7));
const open: KvStateTier[] = [];
const track = <T extends KvStateTier>(s: T): T => (open.push(s), s);

/** The directory the store writes into, learnt from the path it hands a writer. */
async function dirOf(store: KvStateTier): Promise<string> {
  let dir = "";
  await store.put("probe", [], "c", async (path) => {
    dir = dirname(path);
    writeFileSync(path, "x");
  });
  store.delete("probe");
  return dir;
}

afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

describe("KvStateTier", () => {
  it("stores entries with their token ids and reads them back pinned", async () => {
    const store = track(new L2StateTier({ capacityBytes: 1000 }));
    const e = await store.put("p1", [1, 2, 3], "m", writer(100));
    expect(e).toEqual({ key: "p1", tokenIds: [1, 2, 3], bytes: 100, compat: "m" });
    const size = await store.read("p1", async (path, entry) => {
      expect(entry.tokenIds).toEqual([1, 2, 3]);
      return readdirSync(dirname(path)).length;
    });
    expect(size).toBe(1);
    expect(await store.read("nope", async () => 1)).toBeUndefined();
    expect(store.stats()).toMatchObject({ entries: 1, usedBytes: 100, puts: 1, hits: 1, misses: 1, evictions: 0 });
  });

  it("replacing a key frees the old file", async () => {
    const store = track(new L2StateTier({ capacityBytes: 250 }));
    const dir = await dirOf(store);
    await store.put("p", [1], "m", writer(200));
    await store.put("p", [1, 2], "m", writer(200));
    expect(store.peek("p")?.tokenIds).toEqual([1, 2]);
    expect(store.stats().usedBytes).toBe(200);
    expect(readdirSync(dir)).toHaveLength(1);
  });

  it("evicts least recently used entries to make room and removes their files", async () => {
    const store = track(new L2StateTier({ capacityBytes: 300 }));
    const dir = await dirOf(store);
    await store.put("a", [1], "m", writer(100));
    await store.put("b", [2], "m", writer(100));
    await store.put("c", [3], "m", writer(100));
    await store.read("a", async () => undefined); // a becomes most recent: b is now the oldest
    await store.put("d", [4], "m", writer(150));
    expect(store.keys().sort()).toEqual(["a", "d"]);
    expect(store.stats()).toMatchObject({ usedBytes: 250, evictions: 2 });
    expect(readdirSync(dir)).toHaveLength(2);
  });

  it("refuses a state larger than the capacity with a clear error and leaves no file", async () => {
    const store = track(new L2StateTier({ capacityBytes: 100 }));
    const dir = await dirOf(store);
    await store.put("a", [1], "m", writer(50));
    await expect(store.put("big", [1], "m", writer(101))).rejects.toThrow(/L2 KV store is full \(limit 100 bytes\): state for big needs 101 bytes/);
    expect(store.keys()).toEqual(["a"]);
    expect(readdirSync(dir)).toHaveLength(1);
  });

  it("never evicts an entry that is being read", async () => {
    const store = track(new L3StateTier({ capacityBytes: 100 }));
    await store.put("a", [1], "m", writer(80));
    await store.read("a", async () => {
      await expect(store.put("b", [2], "m", writer(80))).rejects.toThrow(/L3 KV store is full/);
    });
    expect(store.keys()).toEqual(["a"]);
    await store.put("b", [2], "m", writer(80));
    expect(store.keys()).toEqual(["b"]);
  });

  it("a file deleted while being read stays until the reader is done", async () => {
    const store = track(new L3StateTier({ capacityBytes: 100 }));
    await store.put("a", [1], "m", writer(10));
    let seen = "";
    await store.read("a", async (path) => {
      seen = path;
      store.delete("a");
      expect(existsSync(path)).toBe(true);
    });
    expect(existsSync(seen)).toBe(false);
  });

  it("finds the longest compatible saved prefix of a token list", async () => {
    const store = track(new L3StateTier({ capacityBytes: 1000 }));
    await store.put("short", [1, 2], "m", writer(10));
    await store.put("long", [1, 2, 3, 4], "m", writer(10));
    await store.put("other-model", [1, 2, 3, 4, 5], "x", writer(10));
    await store.put("diverges", [1, 2, 9], "m", writer(10));
    expect(store.longestPrefix([1, 2, 3, 4, 5, 6], "m")?.key).toBe("long");
    expect(store.longestPrefix([1, 2, 3], "m")?.key).toBe("short");
    expect(store.longestPrefix([1, 2, 3, 4, 5], "x")?.key).toBe("other-model");
    expect(store.longestPrefix([1, 2, 3], "m", 3)).toBeUndefined();
    expect(store.longestPrefix([7], "m")).toBeUndefined();
  });

  it("removes its files on close; an owned temp dir goes too, a given dir stays", async () => {
    const l2 = new L2StateTier({ capacityBytes: 1000 });
    const l2dir = await dirOf(l2);
    await l2.put("a", [1], "m", writer(10));
    l2.close();
    l2.close();
    expect(existsSync(l2dir)).toBe(false);
    await expect(l2.put("b", [1], "m", writer(1))).rejects.toThrow(/L2 KV store is closed/);

    const shared = mkdtempSync(join(tmpdir(), "arbor-l3-test-"));
    try {
      writeFileSync(join(shared, "someone-elses.txt"), "keep");
      const l3 = new L3StateTier({ capacityBytes: 1000, dir: shared });
      await l3.put("a", [1], "m", writer(10));
      await l3.put("b", [1], "m", writer(10));
      expect(readdirSync(shared)).toHaveLength(3);
      l3.close();
      expect(readdirSync(shared)).toEqual(["someone-elses.txt"]);
    } finally {
      rmSync(shared, { recursive: true, force: true });
    }
  });

  it("rejects a bad capacity and cleans up after a failed write", async () => {
    expect(() => new L2StateTier({ capacityBytes: 0 })).toThrow(/L2 store capacityBytes must be a positive number, got 0/);
    const store = track(new L2StateTier({ capacityBytes: 100 }));
    const dir = await dirOf(store);
    await expect(
      store.put("a", [1], "m", async (path) => {
        writeFileSync(path, "partial");
        throw new Error("disk full");
      }),
    ).rejects.toThrow(/cannot save state for a: disk full/);
    expect(readdirSync(dir)).toHaveLength(0);
    expect(store.stats().usedBytes).toBe(0);
  });
});
