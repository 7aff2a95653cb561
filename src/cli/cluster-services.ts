// What every service of a deployment derives from its cluster file alike: the shared store it opens, and the engines
// weights are loaded on. Kept apart from run-deployment.ts so that `arbor serve gateway|worker|trainer-api` load
// only this, not the embedded run's engines and sandboxes.
import { splitBaseUrl } from "../backends/engine-http.js";
import type { ClusterConfig } from "../core/cluster-config.js";
import { ArborError } from "../core/errors.js";
import { enginePolicy, type SyncedEngine } from "../loop/weight-sync.js";
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
    return { name: e.name, url: splitBaseUrl(b.name, b.url).root, inFlight: e.inFlightOnWeightSwitch };
  });
}

/** The policy a resumed training run goes on from: its version and checkpoint (none at version 0). */
export interface ResumedPolicy {
  version: number;
  checkpoint?: string;
}

/**
 * The policy version a cluster's engines serve as a run starts: a long-lived deployment's engines keep the weights
 * of the last run that trained on them. A rollout takes them as they are (its calls record that version); a training
 * run starts where its trainer does, at version 0 of its model, so engines serving a later version are refused,
 * named, as are engines serving different versions. A resumed training run (`resumed`) goes on from its checkpoint:
 * engines serving it still (the version and that file) are taken as they are, engines at version 0 (restarted) load
 * it, others are refused. An engine that does not answer is left out (`log` says so): the gateway routes around a
 * dead engine, and a run must not fail for one.
 */
export async function clusterStartVersion(engines: readonly SyncedEngine[], training: boolean, log: (line: string) => void, resumed?: ResumedPolicy): Promise<number> {
  const answers = await Promise.all(engines.map(async (e) => ({ name: e.name, policy: await enginePolicy(e).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err)))) })));
  const served: { name: string; version: number; modelPath: string | null }[] = [];
  for (const a of answers) {
    if (a.policy instanceof Error) log(`engines  ${a.policy.message}: left out of the policy version check`);
    else served.push({ name: a.name, ...a.policy });
  }
  const list = served.map((s) => `${s.name} v${s.version}${s.modelPath !== null ? ` (${s.modelPath})` : ""}`).join(", ");
  if (new Set(served.map((s) => s.version)).size > 1) throw new ArborError(`cluster engines serve different policy versions (${list}): restart them (arbor serve engine) so that they serve one`, "config");
  const version = served[0]?.version ?? 0;
  if (!training || version === 0) return version;
  if (resumed === undefined) {
    throw new ArborError(`cluster engines serve policy version ${version} (${list}), left by an earlier training run; a training run starts from version 0 of its model.path: restart the engines (arbor serve engine) first`, "config");
  }
  if (version !== resumed.version || served.some((s) => s.modelPath !== null && s.modelPath !== resumed.checkpoint)) {
    const from = resumed.version === 0 ? "version 0 of its model.path" : `policy version ${resumed.version} (${String(resumed.checkpoint)})`;
    throw new ArborError(`cluster engines serve policy version ${version} (${list}); the resumed run goes on from ${from}: restart the engines (arbor serve engine) first${resumed.version > 0 ? " (it loads its checkpoint on engines at version 0)" : ""}`, "config");
  }
  return version;
}

/** The cluster file's mixed engines (each served by the backend of its name); prefill/decode ones pair up behind a disagg backend. */
export function servedEngines(cluster: ClusterConfig): ClusterConfig["engines"] {
  return cluster.engines.filter((e) => e.role === "mixed");
}
