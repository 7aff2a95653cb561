// What every service of a deployment derives from its cluster file alike: the shared store it opens, and the engines
// weights are loaded on. Kept apart from run-deployment.ts so that `arbor serve gateway|worker|trainer-api` load
// only this, not the embedded run's engines and sandboxes.
import type { ClusterConfig } from "../core/cluster-config.js";
import { ArborError } from "../core/errors.js";
import type { SyncedEngine } from "../loop/weight-sync.js";
import { openStore } from "../store/registry.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";

/** A deployment's shared store (Postgres: the cluster file refuses anything else), as its services open it. */
export function openClusterStore(cluster: ClusterConfig): Promise<TrajectoryStore> {
  const st = cluster.store;
  return openStore({ kind: "postgres", url: st.url as string, ...(st.schema !== undefined ? { schema: st.schema } : {}), ...(st.poolSize !== undefined ? { poolSize: st.poolSize } : {}) });
}

/**
 * The engines of a cluster file as weight-sync targets: each at the URL of its backend of the same name. Prefill
 * and decode engines are reached through a `type: disagg` backend instead, and are not trained here (a run with
 * `train` over such a backend is refused).
 */
export function clusterSyncedEngines(cluster: ClusterConfig): SyncedEngine[] {
  return servedEngines(cluster).map((e): SyncedEngine => {
    const b = cluster.backends.find((x) => x.name === e.name);
    if (b?.url === undefined) throw new ArborError(`cluster file: engine '${e.name}' needs a backend of the same name with its url (the gateway reaches it there, and weights are loaded there)`, "config");
    return { name: e.name, url: b.url.replace(/\/v1\/?$/, ""), inFlight: e.inFlightOnWeightSwitch };
  });
}

/** The cluster file's mixed engines (each served by the backend of its name); prefill/decode ones pair up behind a disagg backend. */
export function servedEngines(cluster: ClusterConfig): ClusterConfig["engines"] {
  return cluster.engines.filter((e) => e.role === "mixed");
}
