// `arbor serve gateway --cluster cluster.yaml`: the deployment's gateway alone in its process, routing
// to the file's backends (its engines by URL, external vLLM/SGLang ones), recording into its Postgres
// store; /healthz, /readyz (store open and a backend healthy) and a graceful drain on SIGTERM.
import { createBackend } from "../backends/registry.js";
import { loadClusterConfig } from "../core/cluster-config.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { createGateway } from "../gateway/server.js";
import { openStore } from "../store/registry.js";
import { serveUntilSignalled } from "./service-lifecycle.js";

export interface ServeGatewayOptions {
  cluster: string;
  /** Longest wait for in-flight calls on SIGTERM, ms. */
  drainMs: number;
  log?: (line: string) => void;
}

/** Open the store, start the gateway over every backend and serve until a signal; resolves once drained and closed. */
export async function serveGatewayCommand(o: ServeGatewayOptions): Promise<void> {
  const log = o.log ?? ((line: string) => console.error(line));
  const cfg = loadClusterConfig(o.cluster);
  const g = cfg.gateway;
  const adminToken = adminTokenOf(g.auth?.adminTokenEnv);
  // Backends are built (and their configs checked) before anything opens.
  const backends = cfg.backends.map((b) => createBackend(b));
  const st = cfg.store;
  const store = await openStore({ kind: "postgres", url: st.url as string, ...(st.schema !== undefined ? { schema: st.schema } : {}), ...(st.poolSize !== undefined ? { poolSize: st.poolSize } : {}) });
  let storeClosed = false;
  const gateway = createGateway({
    backends,
    store,
    traceSource: { callsOf: async (id) => (await store.getTrajectory(id))?.calls ?? [] },
    clock: realClock,
    routing: g.routing,
    callTimeoutMs: g.callTimeoutMs,
    health: g.health,
    notReady: () => (storeClosed ? "the store is closed" : undefined),
    ...(g.pausing.enabled ? { pausing: g.pausing } : {}),
    ...(g.dividedRollout ? { dividedRollout: g.dividedRollout } : {}),
    ...(adminToken && g.auth ? { auth: { adminToken, requireProgramKeys: g.auth.requireProgramKeys } } : {}),
    ...(g.limits ? { limits: g.limits } : {}),
  });
  let url: string;
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
  log(`gateway listening on ${url} (${routing} over ${cfg.backends.map((b) => `${b.name} ${b.url}`).join(", ")}; store ${storeName}; /healthz, /readyz)`);
  await serveUntilSignalled({
    name: "gateway",
    probes: gateway.probes,
    drainMs: o.drainMs,
    close: async () => {
      // Programs still active end as aborted in the store before it closes.
      await gateway.close();
      storeClosed = true;
      await store.close();
    },
    log,
  });
}

/** The admin token from the environment variable `gateway.auth` names, when it asks for one. */
function adminTokenOf(env: string | undefined): string | undefined {
  if (env === undefined) return undefined;
  const token = process.env[env];
  if (!token || token.length < 16) throw new ArborError(`gateway.auth: set ${env} to an admin token of at least 16 characters`, "config");
  return token;
}
