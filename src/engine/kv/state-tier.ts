// The KV tiers (tier.ts) holding real KV: llama.cpp sequence-state files, the KV of a paused
// program's last context, kept under a byte budget with LRU eviction. L2 is one engine's host memory
// (private temp dir); L3 is a directory shared by every engine of the process/machine, searchable by
// the token ids each saved state covers. The engine saves and loads program state only through these
// tiers (the scheduled llama.cpp runner's pause/restore), as the paged block manager offloads blocks
// to the block-identity tiers of tier.ts.
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commonPrefix } from "../../core/common-prefix.mjs";
import { ArborError } from "../../core/errors.js";
import { checkTierName, type KvTierName } from "./tier.js";

/** One saved sequence state. */
export interface KvStateEntry {
  readonly key: string;
  /** Token ids whose KV the state holds, in order (the sequence's context tokens). */
  readonly tokenIds: readonly number[];
  /** File size in bytes, charged against the store's capacity. */
  readonly bytes: number;
  /** Identifies the engine shape the state can be loaded into (model file, sequences, KV type). */
  readonly compat: string;
}

export interface KvStateTierStats {
  entries: number;
  usedBytes: number;
  capacityBytes: number;
  puts: number;
  hits: number;
  misses: number;
  evictions: number;
}

/** A bounded tier of sequence-state files keyed by program (or prefix) id. */
export interface KvStateTier {
  readonly name: KvTierName;
  readonly capacityBytes: number;
  /**
   * Store a state under `key`, replacing any previous one: `write(path)` must create the file
   * (e.g. `seq.saveStateToFile(path)`). Older unpinned entries are evicted, least recently used
   * first, to make room; throws a `CapacityError`-coded ArborError when the state cannot fit.
   */
  put(key: string, tokenIds: readonly number[], compat: string, write: (path: string) => Promise<unknown>): Promise<KvStateEntry>;
  /** The entry for `key` without touching its recency, or undefined. */
  peek(key: string): KvStateEntry | undefined;
  /**
   * Hand the state file of `key` to `read(path)` (e.g. `seq.loadStateFromFile`), pinned against
   * eviction meanwhile; counts a hit and marks it most recently used. Undefined (a miss) when absent.
   */
  read<T>(key: string, read: (path: string, entry: KvStateEntry) => Promise<T>): Promise<T | undefined>;
  /** The entry with `compat` whose tokens are the longest prefix of `tokenIds` (at least `minTokens`). */
  longestPrefix(tokenIds: readonly number[], compat: string, minTokens?: number): KvStateEntry | undefined;
  /**
   * (Tiers shared across processes, pooled-state-tier.ts.) Learn of a state another process stored
   * under `key`, so that `peek` sees it; undefined when there is none.
   */
  prefetch?(key: string): Promise<KvStateEntry | undefined>;
  /** Remove `key` and its file; false when absent. */
  delete(key: string): boolean;
  keys(): string[];
  stats(): KvStateTierStats;
  /** Remove every file this store wrote (and its directory when the store created it). Idempotent. */
  close(): void;
}

interface Slot extends KvStateEntry {
  path: string;
  lastUse: number;
  pins: number;
}

export interface FileStateTierOptions {
  /** Byte budget for all state files together. */
  capacityBytes: number;
  /** Directory for the files; a fresh temp directory (removed on close) when absent. */
  dir?: string;
}

/** Shared implementation: a directory of state files with an in-memory index, LRU by use count. */
class FileStateTier implements KvStateTier {
  readonly capacityBytes: number;
  private readonly dir: string;
  private readonly ownsDir: boolean;
  private readonly slots = new Map<string, Slot>();
  private used = 0;
  private tick = 0;
  private closed = false;
  private readonly counters = { puts: 0, hits: 0, misses: 0, evictions: 0 };

  constructor(
    readonly name: KvTierName,
    opts: FileStateTierOptions,
  ) {
    checkTierName(name);
    if (!Number.isFinite(opts.capacityBytes) || opts.capacityBytes <= 0) {
      throw new ArborError(`${name} store capacityBytes must be a positive number, got ${opts.capacityBytes}`, "config");
    }
    this.capacityBytes = opts.capacityBytes;
    if (opts.dir === undefined) {
      this.dir = mkdtempSync(join(tmpdir(), `arbor-kv-${name.toLowerCase()}-`));
      this.ownsDir = true;
    } else {
      mkdirSync(opts.dir, { recursive: true });
      this.dir = opts.dir;
      this.ownsDir = false;
    }
  }

  async put(key: string, tokenIds: readonly number[], compat: string, write: (path: string) => Promise<unknown>): Promise<KvStateEntry> {
    this.ensureOpen();
    // A fresh file name per put: a reader may still hold the previous file of the same key.
    const path = join(this.dir, `${this.name.toLowerCase()}-${randomBytes(8).toString("hex")}.state`);
    let bytes: number;
    try {
      await write(path);
      bytes = statSync(path).size;
    } catch (err) {
      rmSync(path, { force: true });
      throw new ArborError(`${this.name} store: cannot save state for ${key}: ${(err as Error).message}`, "kv_store");
    }
    if (this.closed) {
      rmSync(path, { force: true });
      this.ensureOpen();
    }
    const previous = this.slots.get(key);
    const freed = previous?.bytes ?? 0;
    if (bytes > this.capacityBytes || !this.makeRoom(bytes - freed, key)) {
      rmSync(path, { force: true });
      throw new ArborError(
        `${this.name} KV store is full (limit ${this.capacityBytes} bytes): state for ${key} needs ${bytes} bytes, ` +
          `${this.capacityBytes - this.used} free and the rest is pinned`,
        "capacity",
      );
    }
    if (previous) this.remove(key);
    const slot: Slot = { key, tokenIds: [...tokenIds], bytes, compat, path, lastUse: ++this.tick, pins: 0 };
    this.slots.set(key, slot);
    this.used += bytes;
    this.counters.puts++;
    return publicEntry(slot);
  }

  peek(key: string): KvStateEntry | undefined {
    const slot = this.slots.get(key);
    return slot ? publicEntry(slot) : undefined;
  }

  async read<T>(key: string, read: (path: string, entry: KvStateEntry) => Promise<T>): Promise<T | undefined> {
    this.ensureOpen();
    const slot = this.slots.get(key);
    if (!slot) {
      this.counters.misses++;
      return undefined;
    }
    this.counters.hits++;
    slot.lastUse = ++this.tick;
    slot.pins++;
    try {
      return await read(slot.path, publicEntry(slot));
    } finally {
      slot.pins--;
      // Deleted or replaced while pinned: its file was kept for this reader and goes now.
      if (this.slots.get(key) !== slot && slot.pins === 0) rmSync(slot.path, { force: true });
    }
  }

  longestPrefix(tokenIds: readonly number[], compat: string, minTokens = 1): KvStateEntry | undefined {
    const best = longestPrefixOf(this.slots.values(), tokenIds, compat, minTokens);
    return best ? publicEntry(best) : undefined;
  }

  delete(key: string): boolean {
    if (!this.slots.has(key)) return false;
    this.remove(key);
    return true;
  }

  keys(): string[] {
    return [...this.slots.keys()];
  }

  stats(): KvStateTierStats {
    return { entries: this.slots.size, usedBytes: this.used, capacityBytes: this.capacityBytes, ...this.counters };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const key of [...this.slots.keys()]) this.remove(key, true);
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Evict unpinned entries, least recently used first, until `need` more bytes fit. */
  private makeRoom(need: number, replacing: string): boolean {
    if (this.used + need <= this.capacityBytes) return true;
    const victims = [...this.slots.values()]
      .filter((s) => s.pins === 0 && s.key !== replacing)
      .sort((a, b) => a.lastUse - b.lastUse);
    let free = this.capacityBytes - this.used;
    const chosen: string[] = [];
    for (const v of victims) {
      if (free >= need) break;
      chosen.push(v.key);
      free += v.bytes;
    }
    if (free < need) return false;
    for (const key of chosen) {
      this.remove(key);
      this.counters.evictions++;
    }
    return true;
  }

  private remove(key: string, force = false): void {
    const slot = this.slots.get(key);
    if (!slot) return;
    this.slots.delete(key);
    this.used -= slot.bytes;
    // A pinned file is being read; the reader removes it when done (see `read`).
    if (slot.pins === 0 || force) rmSync(slot.path, { force: true });
  }

  private ensureOpen(): void {
    if (this.closed) throw new ArborError(`${this.name} KV store is closed`, "closed");
  }
}

/** Of `entries`, the one with `compat` whose tokens are the longest prefix of `tokenIds` (at least `minTokens`). */
export function longestPrefixOf<E extends KvStateEntry>(entries: Iterable<E>, tokenIds: readonly number[], compat: string, minTokens = 1): E | undefined {
  let best: E | undefined;
  for (const e of entries) {
    const n = e.tokenIds.length;
    if (e.compat !== compat || n < minTokens || n > tokenIds.length || (best && n <= best.tokenIds.length)) continue;
    if (commonPrefix(e.tokenIds, tokenIds) === n) best = e;
  }
  return best;
}

function publicEntry(s: Slot): KvStateEntry {
  return { key: s.key, tokenIds: s.tokenIds, bytes: s.bytes, compat: s.compat };
}

/** L2: one engine's host memory. Files live in a private temp directory removed on close. */
export class L2StateTier extends FileStateTier {
  constructor(opts: { capacityBytes: number }) {
    super("L2", { capacityBytes: opts.capacityBytes });
  }
}

/**
 * L3: the pool shared by all engines of the process/machine — pass one instance to every session
 * manager. With `dir`, files go there (the directory itself is left on close); otherwise a temp dir.
 */
export class L3StateTier extends FileStateTier {
  constructor(opts: FileStateTierOptions) {
    super("L3", opts);
  }
}
