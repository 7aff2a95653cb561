// Store plugins by name: `sqlite` is the embedded default (opens synchronously); `postgres` is the
// networked store many processes and hosts share (opens asynchronously: connect, migrate, recover).
import { ArborError } from "../core/errors.js";
import { checkPostgresOptions, PostgresTrajectoryStore, type PostgresStoreOptions } from "./postgres-store.js";
import { SqliteTrajectoryStore, type SqliteStoreOptions } from "./sqlite-store.js";
import type { TrajectoryStore } from "./trajectory-store.js";

export interface SqliteStoreConfig extends SqliteStoreOptions {
  kind: "sqlite";
  /** Database file (parent directories are created), or `:memory:`. */
  path: string;
}

export interface PostgresStoreConfig extends Omit<PostgresStoreOptions, "clock"> {
  kind: "postgres";
}

export type StoreConfig = SqliteStoreConfig | PostgresStoreConfig;

type Kind = StoreConfig["kind"];

function openSqlite(cfg: SqliteStoreConfig): TrajectoryStore {
  if (typeof cfg.path !== "string" || cfg.path.length === 0) {
    throw new ArborError("store.path: required for the sqlite store", "config");
  }
  return new SqliteTrajectoryStore(cfg.path, { synchronous: cfg.synchronous ?? "full" });
}

async function openPostgres(cfg: PostgresStoreConfig): Promise<TrajectoryStore> {
  // Checked here too so that a bad field is named as the config names it (`store.url`).
  checkPostgresOptions(cfg, "store.");
  const { kind: _kind, ...options } = cfg;
  return PostgresTrajectoryStore.open(options);
}

// `sync`: opens without waiting, so `createStore` can hand it out; every kind can be opened with `openStore`.
const FACTORIES: Record<Kind, { sync?: (cfg: StoreConfig) => TrajectoryStore; open: (cfg: StoreConfig) => Promise<TrajectoryStore> }> = {
  sqlite: {
    sync: (cfg) => openSqlite(cfg as SqliteStoreConfig),
    open: async (cfg) => openSqlite(cfg as SqliteStoreConfig),
  },
  postgres: { open: (cfg) => openPostgres(cfg as PostgresStoreConfig) },
};

/** Names of the registered store kinds. */
export function storeKinds(): string[] {
  return Object.keys(FACTORIES);
}

function factoryOf(kind: string): (typeof FACTORIES)[Kind] {
  const f = Object.hasOwn(FACTORIES, kind) ? FACTORIES[kind as Kind] : undefined;
  if (!f) throw new ArborError(`store.kind: unknown store kind '${kind}' (known: ${storeKinds().join(", ")})`, "config");
  return f;
}

/**
 * Open a trajectory store of a kind that opens synchronously (`sqlite`). Throws an
 * {@link ArborError} for an unknown kind, a bad config, or a kind that must be opened with
 * {@link openStore} (`postgres`).
 */
export function createStore(cfg: StoreConfig | { kind: string; [key: string]: unknown }): TrajectoryStore {
  const f = factoryOf(cfg.kind);
  if (!f.sync) throw new ArborError(`store.kind: the ${cfg.kind} store opens asynchronously; open it with openStore`, "config");
  return f.sync(cfg as StoreConfig);
}

/** Open a trajectory store of any kind. Rejects with an {@link ArborError} for an unknown kind, a bad config, or a store that cannot be opened. */
export async function openStore(cfg: StoreConfig | { kind: string; [key: string]: unknown }): Promise<TrajectoryStore> {
  return factoryOf(cfg.kind).open(cfg as StoreConfig);
}
