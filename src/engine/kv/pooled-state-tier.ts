// The global KV pool (state-pool.ts) as an engine's L3 tier of paused programs (issue 16: Forge's and
// Mooncake's global pool): a program paused to L3 on one engine process can be restored on another
// that shares the pool, its KV loaded there instead of re-prefilled.
// The runner plans with the tier synchronously (peek, longestPrefix), so the tier keeps an index of
// the states it knows: those this engine put, and those it was asked to `prefetch` (the restore of a
// program paused elsewhere). The bytes live only in the pool; a read takes the state out of the pool
// (a program's KV is loaded by one engine), through a local file because llama.cpp loads files.
// The index can go stale (another engine took the state, or the pool evicted it): a read then misses,
// and the runner recomputes, which is the cost of any miss.
import { mkdtempSync, rmSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ArborError } from "../../core/errors.js";
import type { KvStatePool } from "./state-pool.js";
import { longestPrefixOf, type KvStateEntry, type KvStateTier, type KvStateTierStats } from "./state-tier.js";

/** Pool keys of paused programs; a handoff's keys (`kv-<uuid>`, http/kv-handoff.ts) never collide. */
const PREFIX = "program:";

/** Most program states the local index remembers; beyond it the oldest are forgotten (they stay in the pool). */
const MAX_INDEX = 100_000;

/** See the file header. Named "L3": the tier every engine sharing the pool reaches. */
export class PooledStateTier implements KvStateTier {
  readonly name = "L3" as const;
  readonly capacityBytes: number;
  private readonly index = new Map<string, KvStateEntry>();
  /** Made on first use: an engine that never pauses to L3 leaves nothing behind. */
  private dir: string | undefined;
  private readonly counters = { puts: 0, hits: 0, misses: 0, evictions: 0 };
  private closed = false;
  private seq = 0;

  /** `pool` is the engine's; this tier neither connects nor closes it. `log` hears failures of background deletes. */
  constructor(
    private readonly pool: KvStatePool,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.capacityBytes = pool.capacityBytes;
  }

  async put(key: string, tokenIds: readonly number[], compat: string, write: (path: string) => Promise<unknown>): Promise<KvStateEntry> {
    this.ensureOpen();
    const path = this.tempPath();
    try {
      await write(path);
      const entry = await this.pool.put(PREFIX + key, tokenIds, compat, await readFile(path));
      const mine = { ...entry, key };
      this.remember(mine);
      this.counters.puts++;
      return mine;
    } finally {
      await rm(path, { force: true });
    }
  }

  peek(key: string): KvStateEntry | undefined {
    return this.index.get(key);
  }

  /**
   * Learn of the state the pool holds under `key` now (the restore of a program paused elsewhere), so
   * that the runner plans with it; undefined, and forgotten here, when the pool holds none.
   */
  async prefetch(key: string): Promise<KvStateEntry | undefined> {
    this.ensureOpen();
    const got = await this.pool.peek(PREFIX + key);
    if (!got) {
      this.index.delete(key);
      return undefined;
    }
    const entry = { ...got, key };
    this.remember(entry);
    return entry;
  }

  async read<T>(key: string, read: (path: string, entry: KvStateEntry) => Promise<T>): Promise<T | undefined> {
    this.ensureOpen();
    // Taken: the program's KV moves into the reader's sequence and must not be loaded twice.
    const got = await this.pool.get(PREFIX + key, { take: true });
    this.index.delete(key);
    if (!got) {
      this.counters.misses++;
      return undefined;
    }
    this.counters.hits++;
    const path = this.tempPath();
    try {
      await writeFile(path, got.data);
      return await read(path, { ...got.entry, key });
    } finally {
      await rm(path, { force: true });
    }
  }

  longestPrefix(tokenIds: readonly number[], compat: string, minTokens = 1): KvStateEntry | undefined {
    return longestPrefixOf(this.index.values(), tokenIds, compat, minTokens);
  }

  /** Forget `key` here and remove it from the pool (in the background: the runner's call is synchronous). */
  delete(key: string): boolean {
    const had = this.index.delete(key);
    if (had && !this.closed) {
      this.pool.delete(PREFIX + key).catch((e: unknown) => this.log(`KV pool ${this.pool.where}: deleting program ${key} failed: ${(e as Error).message}`));
    }
    return had;
  }

  keys(): string[] {
    return [...this.index.keys()];
  }

  /** What this engine knows of the pool: its indexed states and its own puts, hits and misses. */
  stats(): KvStateTierStats {
    let used = 0;
    for (const e of this.index.values()) used += e.bytes;
    return { entries: this.index.size, usedBytes: used, capacityBytes: this.capacityBytes, ...this.counters };
  }

  /** Forget the index and remove the temp directory; the states stay in the pool for other engines. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.index.clear();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  private remember(entry: KvStateEntry): void {
    this.index.delete(entry.key);
    this.index.set(entry.key, entry);
    if (this.index.size > MAX_INDEX) {
      this.index.delete(this.index.keys().next().value as string);
      this.counters.evictions++;
    }
  }

  private tempPath(): string {
    this.dir ??= mkdtempSync(join(tmpdir(), "arbor-kv-pool-"));
    return join(this.dir, `state-${++this.seq}.bin`);
  }

  private ensureOpen(): void {
    if (this.closed) throw new ArborError(`L3 KV pool tier on ${this.pool.where} is closed`, "closed");
  }
}
