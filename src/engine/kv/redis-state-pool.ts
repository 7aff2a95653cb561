// The global KV pool on Redis (state-pool.ts): each state is a blob key and a metadata hash (token
// ids, compat string, bytes), an LRU sorted set orders them and a stats hash keeps the used bytes
// and counters. Every write, eviction and take runs as one Lua script, so engines in different
// processes (or hosts) sharing the pool never see half a state or count bytes twice. All keys of a
// pool share one hash tag (`arbor:kv:{name}:…`), so they live on one Redis node.
// Every engine of a pool must configure the same capacity: the script enforces the capacity the
// writing client passes. States changed behind the pool's back (FLUSHALL, Redis' own maxmemory
// eviction) leave the byte count high until `clear()`.
import { Redis } from "ioredis";
import { ArborError } from "../../core/errors.js";
import type { KvStateEntry, KvStateTierStats } from "./state-tier.js";
import type { KvStatePool, PooledState } from "./state-pool.js";

export interface RedisStatePoolOptions {
  /** Redis URL, e.g. `redis://127.0.0.1:6379` (`rediss://` for TLS, credentials in the URL). */
  url: string;
  /** Byte budget of all states together. */
  capacityBytes: number;
  /** Pool name: engines with the same name share states (default "default"). Letters, digits, `-`, `_`, `.`. */
  name?: string;
  /** Longest wait for one command, ms (default 10 000). */
  commandTimeoutMs?: number;
  /** Longest wait for the connection, ms (default 5 000). */
  connectTimeoutMs?: number;
}

// KEYS[1] lru zset, KEYS[2] stats hash; ARGV: base, key, capacity, blob, tokens (JSON), compat.
const PUT = `
local base, key, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
local bytes = string.len(ARGV[4])
local used = tonumber(redis.call('HGET', KEYS[2], 'used') or '0')
if bytes > cap then return {0, used} end
local old = redis.call('HGET', base .. 'meta:' .. key, 'bytes')
if old then used = used - tonumber(old) end
local evicted = 0
while used + bytes > cap do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 1)
  local victim = oldest[1]
  if victim == key then victim = oldest[2] end
  if not victim then break end
  local vb = redis.call('HGET', base .. 'meta:' .. victim, 'bytes')
  redis.call('DEL', base .. 'meta:' .. victim, base .. 'blob:' .. victim)
  redis.call('ZREM', KEYS[1], victim)
  if vb then used = used - tonumber(vb) end
  evicted = evicted + 1
end
local tick = redis.call('HINCRBY', KEYS[2], 'tick', 1)
redis.call('SET', base .. 'blob:' .. key, ARGV[4])
redis.call('HSET', base .. 'meta:' .. key, 'tokens', ARGV[5], 'compat', ARGV[6], 'bytes', bytes)
redis.call('ZADD', KEYS[1], tick, key)
redis.call('HSET', KEYS[2], 'used', used + bytes)
redis.call('HINCRBY', KEYS[2], 'puts', 1)
if evicted > 0 then redis.call('HINCRBY', KEYS[2], 'evictions', evicted) end
return {1, used + bytes}
`;

// KEYS[1] lru zset, KEYS[2] stats hash; ARGV: base, key, take ("1" removes the state).
const GET = `
local base, key = ARGV[1], ARGV[2]
local meta = redis.call('HMGET', base .. 'meta:' .. key, 'tokens', 'compat', 'bytes')
local blob = redis.call('GET', base .. 'blob:' .. key)
if not meta[1] or not blob then
  redis.call('HINCRBY', KEYS[2], 'misses', 1)
  return false
end
redis.call('HINCRBY', KEYS[2], 'hits', 1)
if ARGV[3] == '1' then
  redis.call('DEL', base .. 'meta:' .. key, base .. 'blob:' .. key)
  redis.call('ZREM', KEYS[1], key)
  redis.call('HINCRBY', KEYS[2], 'used', -tonumber(meta[3]))
else
  redis.call('ZADD', KEYS[1], redis.call('HINCRBY', KEYS[2], 'tick', 1), key)
end
return {blob, meta[1], meta[2]}
`;

// KEYS[1] lru zset, KEYS[2] stats hash; ARGV: base, key.
const DELETE = `
local base, key = ARGV[1], ARGV[2]
local bytes = redis.call('HGET', base .. 'meta:' .. key, 'bytes')
redis.call('DEL', base .. 'meta:' .. key, base .. 'blob:' .. key)
local removed = redis.call('ZREM', KEYS[1], key)
if bytes then redis.call('HINCRBY', KEYS[2], 'used', -tonumber(bytes)) end
return removed
`;

interface PoolScripts {
  arborKvPut(lru: string, stats: string, base: string, key: string, cap: number, blob: Uint8Array, tokens: string, compat: string): Promise<[number, number]>;
  arborKvGetBuffer(lru: string, stats: string, base: string, key: string, take: string): Promise<[Buffer, Buffer, Buffer] | null>;
  arborKvDelete(lru: string, stats: string, base: string, key: string): Promise<number>;
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** A {@link KvStatePool} on one Redis server; see the file header. */
export class RedisStatePool implements KvStatePool {
  readonly where: string;
  readonly capacityBytes: number;
  private readonly redis: Redis;
  private readonly scripts: PoolScripts;
  private readonly base: string;
  private readonly lru: string;
  private readonly statsKey: string;
  private closed = false;

  constructor(opts: RedisStatePoolOptions) {
    if (!Number.isFinite(opts.capacityBytes) || opts.capacityBytes <= 0) {
      throw new ArborError(`kvPool.capacityBytes must be a positive number, got ${opts.capacityBytes}`, "config");
    }
    const name = opts.name ?? "default";
    if (!NAME.test(name)) throw new ArborError(`kvPool.name must be 1-64 letters, digits, '-', '_' or '.', got ${JSON.stringify(name)}`, "config");
    let url: URL;
    try {
      url = new URL(opts.url);
    } catch {
      throw new ArborError(`kvPool.url must be a redis:// or rediss:// URL, got ${JSON.stringify(opts.url)}`, "config");
    }
    if (url.protocol !== "redis:" && url.protocol !== "rediss:") throw new ArborError(`kvPool.url must be a redis:// or rediss:// URL, got ${JSON.stringify(opts.url)}`, "config");
    this.capacityBytes = opts.capacityBytes;
    this.base = `arbor:kv:{${name}}:`;
    this.lru = `${this.base}lru`;
    this.statsKey = `${this.base}stats`;
    // Credentials stay out of messages.
    this.where = `${url.protocol}//${url.host} ${this.base.slice(0, -1)}`;
    this.redis = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: opts.connectTimeoutMs ?? 5000,
      commandTimeout: opts.commandTimeoutMs ?? 10_000,
      // A lost connection fails the command (the engine recomputes) rather than queueing it unboundedly.
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      retryStrategy: (times) => (times > 20 ? null : Math.min(times * 100, 2000)),
    });
    // Errors reach the caller through the failed command; an unhandled 'error' event would crash.
    this.redis.on("error", () => undefined);
    this.redis.defineCommand("arborKvPut", { lua: PUT, numberOfKeys: 2 });
    this.redis.defineCommand("arborKvGet", { lua: GET, numberOfKeys: 2 });
    this.redis.defineCommand("arborKvDelete", { lua: DELETE, numberOfKeys: 2 });
    this.scripts = this.redis as unknown as PoolScripts;
  }

  /** Connect now (otherwise the first command connects); rejects naming the pool when unreachable. */
  async connect(): Promise<this> {
    await this.call("connect", async () => {
      if (this.redis.status === "wait") await this.redis.connect();
      await this.redis.ping();
    });
    return this;
  }

  async put(key: string, tokenIds: readonly number[], compat: string, data: Uint8Array): Promise<KvStateEntry> {
    checkKey(key);
    const [ok, used] = await this.call(`put ${key}`, () =>
      this.scripts.arborKvPut(this.lru, this.statsKey, this.base, key, this.capacityBytes, data, JSON.stringify(tokenIds), compat),
    );
    if (ok !== 1) {
      throw new ArborError(
        `KV pool ${this.where} is full (limit ${this.capacityBytes} bytes): state for ${key} needs ${data.byteLength} bytes (${used} in use)`,
        "capacity",
      );
    }
    return { key, tokenIds: [...tokenIds], bytes: data.byteLength, compat };
  }

  async get(key: string, opts: { take?: boolean } = {}): Promise<PooledState | undefined> {
    checkKey(key);
    const got = await this.call(`get ${key}`, () => this.scripts.arborKvGetBuffer(this.lru, this.statsKey, this.base, key, opts.take ? "1" : "0"));
    if (!got) return undefined;
    const [data, tokens, compat] = got;
    return { entry: { key, tokenIds: parseTokens(tokens.toString("utf8"), key), bytes: data.byteLength, compat: compat.toString("utf8") }, data };
  }

  async peek(key: string): Promise<KvStateEntry | undefined> {
    checkKey(key);
    const [tokens, compat, bytes] = await this.call(`peek ${key}`, () => this.redis.hmget(`${this.base}meta:${key}`, "tokens", "compat", "bytes"));
    if (tokens == null || compat == null || bytes == null) return undefined;
    return { key, tokenIds: parseTokens(tokens, key), bytes: Number(bytes), compat };
  }

  async delete(key: string): Promise<boolean> {
    checkKey(key);
    return (await this.call(`delete ${key}`, () => this.scripts.arborKvDelete(this.lru, this.statsKey, this.base, key))) === 1;
  }

  keys(): Promise<string[]> {
    return this.call("keys", () => this.redis.zrange(this.lru, "0", "-1"));
  }

  async stats(): Promise<KvStateTierStats> {
    const [h, entries] = await this.call("stats", () => Promise.all([this.redis.hgetall(this.statsKey), this.redis.zcard(this.lru)]));
    const n = (f: string): number => Number(h[f] ?? 0);
    return { entries, usedBytes: n("used"), capacityBytes: this.capacityBytes, puts: n("puts"), hits: n("hits"), misses: n("misses"), evictions: n("evictions") };
  }

  /** Remove every state and counter of this pool (all engines' states: operators and tests). */
  async clear(): Promise<void> {
    await this.call("clear", async () => {
      // The pool's keys are found by pattern; `{`/`}` of the hash tag are glob-literal here.
      const pattern = `${this.base.replace(/[*?[\]\\]/g, "\\$&")}*`;
      let cursor = "0";
      do {
        const [next, found] = await this.redis.scan(cursor, "MATCH", pattern, "COUNT", "500");
        if (found.length > 0) await this.redis.del(...found);
        cursor = next;
      } while (cursor !== "0");
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.redis.status === "wait" || this.redis.status === "end") {
      this.redis.disconnect();
      return;
    }
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  /** Run a command; failures become "kv_pool" ArborErrors naming the pool and the operation. */
  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new ArborError(`KV pool ${this.where} is closed`, "closed");
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ArborError) throw err;
      throw new ArborError(`KV pool ${this.where}: ${what} failed: ${(err as Error).message}`, "kv_pool");
    }
  }
}

function checkKey(key: string): void {
  if (typeof key !== "string" || key === "" || key.length > 512) throw new ArborError(`KV pool key must be 1-512 characters, got ${JSON.stringify(key)}`, "invalid_request");
}

function parseTokens(text: string, key: string): number[] {
  const v: unknown = JSON.parse(text);
  if (!Array.isArray(v) || v.some((t) => !Number.isInteger(t))) throw new ArborError(`KV pool: the token ids of ${key} are corrupt`, "kv_pool");
  return v as number[];
}
