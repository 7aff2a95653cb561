// The global KV pool (issue 16: Forge, Mooncake): sequence states that every engine process can
// reach, keyed by a program, prefix or handoff id, so that one engine loads what another saved —
// a prefill engine's prompt KV handed to a decode engine, or a paused program restored elsewhere.
// Asynchronous, unlike the in-process tiers of state-tier.ts, because the pool is a networked store
// (redis-state-pool.ts): a state travels as bytes, and a load/save goes through a local file only
// where llama.cpp needs one (the engine's own L2 tier).
import type { KvStateEntry, KvStateTierStats } from "./state-tier.js";

/** A state read from the pool: its entry and its bytes (a llama.cpp sequence-state file). */
export interface PooledState {
  entry: KvStateEntry;
  data: Buffer;
}

/** A byte-bounded pool of sequence states shared by engine processes; LRU eviction. */
export interface KvStatePool {
  /** Where the pool is, for messages (e.g. `redis://127.0.0.1:6379 arbor:kv:{default}`). */
  readonly where: string;
  readonly capacityBytes: number;
  /**
   * Store `data` under `key` with the token ids its KV covers and the engine-shape `compat`
   * string, replacing any previous state of `key`; least recently used states are evicted to make
   * room. Rejects with a "capacity" ArborError when the state alone exceeds the capacity.
   */
  put(key: string, tokenIds: readonly number[], compat: string, data: Uint8Array): Promise<KvStateEntry>;
  /**
   * The state of `key` (marked most recently used), or undefined (a miss). With `take`, the state
   * leaves the pool in the same atomic step: a handed-off KV is loaded by one engine only.
   */
  get(key: string, opts?: { take?: boolean }): Promise<PooledState | undefined>;
  /** The entry of `key` without its bytes and without touching its recency. */
  peek(key: string): Promise<KvStateEntry | undefined>;
  /** Remove `key`; false when absent. */
  delete(key: string): Promise<boolean>;
  /** Keys held, least recently used first. */
  keys(): Promise<string[]>;
  stats(): Promise<KvStateTierStats>;
  /** Close this client's connection (the pool's states stay for the other engines). Idempotent. */
  close(): Promise<void>;
}
