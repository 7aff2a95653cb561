// `arbor serve gateway --cluster cluster.yaml`: the deployment's gateway alone in its process, routing
// to the file's backends (its engines by URL, external vLLM/SGLang ones), recording into its Postgres
// store; /healthz, /readyz (store open and a backend healthy) and a graceful drain on SIGTERM. It takes back the
// programs active in the store when it starts and leaves its own active when it stops, so a restart loses none.
import { lineLog, processLog } from "../core/logger.js";
import { createBackend } from "../backends/registry.js";
import { loadClusterConfig, type ClusterConfig } from "../core/cluster-config.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { createGateway } from "../gateway/server.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { openClusterStore } from "./cluster-services.js";
import { serveUntilSignalled } from "./service-lifecycle.js";

export interface ServeGatewayOptions {
  cluster: string;
  /** Longest wait for in-flight calls on SIGTERM, ms. */
  drainMs: number;
  log?: (line: string) => void;
}

/** Open the store, start the gateway over every backend and serve until a signal; resolves once drained and closed. */
export async function serveGatewayCommand(o: ServeGatewayOptions): Promise<void> {
  const log = o.log ?? lineLog(processLog("gateway"));
  const cfg = loadClusterConfig(o.cluster);
  const g = cfg.gateway;
  const adminToken = adminTokenOf(g.auth?.adminTokenEnv);
  // Backends are built (and their configs checked) before anything opens.
  const backends = cfg.backends.map((b) => createBackend(b));
  const store = await openClusterStore(cfg);
  let storeClosed = false;
  const gateway = createGateway({
    backends,
    logger: processLog("gateway"),
    store,
    traceSource: { callsOf: async (id) => (await store.getTrajectory(id))?.calls ?? [] },
    clock: realClock,
    routing: g.routing,
    callTimeoutMs: g.callTimeoutMs,
    maxTokensPolicy: g.maxTokensPolicy,
    health: g.health,
    notReady: () => (storeClosed ? "the store is closed" : undefined),
    ...(g.pausing.enabled ? { pausing: g.pausing } : {}),
    ...(g.dividedRollout ? { dividedRollout: g.dividedRollout } : {}),
    ...(adminToken && g.auth ? { auth: { adminToken, requireProgramKeys: g.auth.requireProgramKeys } } : {}),
    ...(g.limits ? { limits: g.limits } : {}),
    // A deployment's gateway may restart (or be replaced): its programs stay active in the store when it stops,
    // and the next one takes them back with their keys.
    restorable: { activePrograms: () => activePrograms(store) },
  });
  let url: string;
  let restored: number;
  try {
    restored = await gateway.restore();
  } catch (e) {
    await gateway.close().catch(() => undefined);
    await store.close();
    throw new ArborError(`gateway: cannot take back the programs active in the store: ${(e as Error).message}`, "config");
  }
  try {
    // Unlike `arbor run`, engines need not be up yet: readiness says when one is.
    url = await gateway.listen(g.host, g.port);
  } catch (e) {
    await gateway.close().catch(() => undefined);
    await store.close();
    throw new ArborError(`gateway: cannot listen on ${g.host}:${g.port}: ${(e as Error).message}`, "config");
  }
  const storeName = (store as { label?: string }).label ?? "postgres store";
  const routing = typeof g.routing === "string" ? g.routing : "custom routing";
  log(`gateway listening on ${url} (${routing} over ${cfg.backends.map(backendWhere).join(", ")}; store ${storeName}; /healthz, /readyz)`);
  if (restored > 0) log(`gateway: took back ${restored} program(s) active in the store (their calls and keys go on as before)`);
  await serveUntilSignalled({
    name: "gateway",
    probes: gateway.probes,
    drainMs: o.drainMs,
    close: async () => {
      // Programs still active stay active in the store: the gateway that starts next takes them back.
      await gateway.close();
      storeClosed = true;
      await store.close();
    },
    log,
  });
}

/** A backend as the start-up line names it: its URL, or a disagg backend's engines by role. */
function backendWhere(b: ClusterConfig["backends"][number]): string {
  if (b.type !== "disagg") return `${b.name} ${b.url}`;
  const roles = (["prefill", "decode", "mixed"] as const).filter((r) => b[r] !== undefined).map((r) => `${r} ${(b[r] as string[]).join(" ")}`);
  return `${b.name} (disagg: ${roles.join("; ")})`;
}

/** The admin token from the environment variable `gateway.auth` names, when it asks for one. */
function adminTokenOf(env: string | undefined): string | undefined {
  if (env === undefined) return undefined;
  const token = process.env[env];
  if (!token || token.length < 16) throw new ArborError(`gateway.auth: set ${env} to an admin token of at least 16 characters`, "config");
  return token;
}

/** The programs active in the store, with their recorded calls: those of runs not finished yet (ids and counts only). */
async function activePrograms(store: TrajectoryStore): Promise<{ id: string; calls: number }[]> {
  const out: { id: string; calls: number }[] = [];
  for (const run of await store.listRuns()) if (run.endedAt === undefined) out.push(...(await store.activePrograms(run.id)));
  return out;
}
