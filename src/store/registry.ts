// Store plugins by name: `sqlite` is the embedded default; distributed stores register here too.
import { ArborError } from "../core/errors.js";
import { SqliteTrajectoryStore, type SqliteStoreOptions } from "./sqlite-store.js";
import type { TrajectoryStore } from "./trajectory-store.js";

export interface SqliteStoreConfig extends SqliteStoreOptions {
  kind: "sqlite";
  /** Database file (parent directories are created), or `:memory:`. */
  path: string;
}

export type StoreConfig = SqliteStoreConfig;

const FACTORIES: Record<StoreConfig["kind"], (cfg: StoreConfig) => TrajectoryStore> = {
  sqlite: (cfg) => {
    if (typeof cfg.path !== "string" || cfg.path.length === 0) {
      throw new ArborError("store.path: required for the sqlite store", "config");
    }
    return new SqliteTrajectoryStore(cfg.path, { synchronous: cfg.synchronous ?? "full" });
  },
};

/** Names of the registered store kinds. */
export function storeKinds(): string[] {
  return Object.keys(FACTORIES);
}

/** Open a trajectory store by kind. Throws an {@link ArborError} for an unknown kind or a bad config. */
export function createStore(cfg: StoreConfig | { kind: string; [key: string]: unknown }): TrajectoryStore {
  const factory = Object.hasOwn(FACTORIES, cfg.kind) ? FACTORIES[cfg.kind as StoreConfig["kind"]] : undefined;
  if (!factory) {
    throw new ArborError(`store.kind: unknown store kind '${cfg.kind}' (known: ${storeKinds().join(", ")})`, "config");
  }
  return factory(cfg as StoreConfig);
}
