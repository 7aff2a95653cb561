// The dashboard's HTTP server (Fastify): the JSON API and the SSE stream of docs/dashboard.md over a
// DashboardSource (run-source.ts), and the web UI's bundle (web/dashboard/, built by `npm run build` into
// dist/dashboard/). One poll loop reads the source every `pollMs` into one snapshot that every request and
// client is served from, so the cost of the sources does not grow with the number of viewers.
import { existsSync, readFileSync, statSync } from "node:fs";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import Fastify, { type FastifyInstance } from "fastify";
import type { Clock, Timer } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import type { Overview, ProgramRow, ProgramsPage } from "./dashboard-types.js";
import type { DashboardSource, Snapshot } from "./run-source.js";
import { SseHub } from "./sse-hub.js";

/** The bundle `npm run build` writes (src/cli/dashboard/ and dist/cli/dashboard/ are both three levels below the package root). */
export const DEFAULT_WEB_ROOT = fileURLToPath(new URL("../../../dist/dashboard/", import.meta.url));
/** Most programs one GET /api/programs returns. */
export const MAX_PAGE = 500;

export interface DashboardServerOptions {
  source: DashboardSource;
  clock: Clock;
  /** Between polls of the source (default 1000 ms). */
  pollMs?: number;
  /** The built web UI (default: $ARBOR_DASHBOARD_WEB, else the package's dist/dashboard/). */
  webRoot?: string;
  /** SSE: events kept per slow client, heartbeat interval. */
  sseQueue?: number;
  heartbeatMs?: number;
}

export interface DashboardServer {
  app: FastifyInstance;
  /** Poll the source now (the loop polls on its own; tests call this to step). */
  pollNow(): Promise<Overview>;
  listen(host: string, port: number): Promise<string>;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".json": "application/json", ".map": "application/json", ".png": "image/png", ".ico": "image/x-icon" };

/** Build the dashboard server over `source`; nothing is polled until `listen` (or `pollNow`). */
export function createDashboardServer(o: DashboardServerOptions): DashboardServer {
  const pollMs = o.pollMs ?? 1000;
  if (!(pollMs >= 10)) throw new ArborError(`dashboard: pollMs must be >= 10, got ${pollMs}`, "config");
  // ARBOR_DASHBOARD_WEB: another build of the UI (a development build, or a test's own).
  const webRoot = resolve(o.webRoot ?? process.env.ARBOR_DASHBOARD_WEB ?? DEFAULT_WEB_ROOT);
  const hub = new SseHub({ clock: o.clock, ...(o.sseQueue !== undefined ? { queueSize: o.sseQueue } : {}), ...(o.heartbeatMs !== undefined ? { heartbeatMs: o.heartbeatMs } : {}) });
  const app = Fastify({ logger: false });
  let snapshot: Snapshot = { runs: [], programs: [], engines: [], gateway: null, sandboxPool: null, curves: [], heldOut: [], highlights: [], errors: [] };
  let overview: Overview = overviewOf(snapshot, 0, o.clock.now(), o.source.mode);
  let seq = 0;
  let polling: Promise<Overview> | undefined;
  let timer: Timer | undefined;
  let closed = false;

  function pollNow(): Promise<Overview> {
    // One poll at a time: a caller during a poll gets that poll's result.
    polling ??= (async () => {
      try {
        snapshot = await o.source.poll();
        overview = overviewOf(snapshot, ++seq, o.clock.now(), o.source.mode);
        hub.publish("overview", overview);
        return overview;
      } finally {
        polling = undefined;
      }
    })();
    return polling;
  }

  function loop(): void {
    if (closed) return;
    timer = o.clock.setTimer(pollMs, () => {
      void pollNow()
        .catch(() => undefined)
        .finally(loop);
    });
  }

  // Named in the answer to an unknown API path.
  const apiRoutes: string[] = [];
  app.addHook("onRoute", (r) => {
    if (r.url.startsWith("/api/") && [r.method].flat().includes("GET")) apiRoutes.push(r.url);
  });
  app.get("/api/overview", async () => overview);
  app.get("/api/runs", async () => ({ runs: snapshot.runs }));
  app.get("/api/programs", async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    const offset = q.offset === undefined ? 0 : Number(q.offset);
    const limit = q.limit === undefined ? 100 : Number(q.limit);
    if (!(Number.isInteger(offset) && offset >= 0)) return reply.code(400).send({ error: `offset: must be an integer >= 0, got ${q.offset}` });
    if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_PAGE)) return reply.code(400).send({ error: `limit: must be an integer in 1..${MAX_PAGE}, got ${q.limit}` });
    return programsPage(snapshot.programs, { state: q.state, phase: q.phase, run: q.run }, offset, limit);
  });
  app.get("/api/programs/:id", async (req, reply) => {
    const { id } = req.params as { id: string };
    const view = await o.source.program(id);
    if (!view) return reply.code(404).send({ error: `program '${id}' is not in the store` });
    const live = snapshot.programs.find((p) => p.id === id);
    return { ...view, live: live ?? null };
  });
  app.get("/api/engines", async () => ({ engines: snapshot.engines, gateway: snapshot.gateway }));
  app.get("/api/sandbox-pool", async () => ({ sandboxPool: snapshot.sandboxPool }));
  app.get("/api/curves", async () => ({ curves: snapshot.curves, heldOut: snapshot.heldOut }));
  app.get("/api/highlights", async () => ({ highlights: snapshot.highlights }));
  app.get("/api/events", (req, reply) => {
    reply.hijack();
    if (!hub.attach(reply.raw, { event: "overview", data: overview })) {
      reply.raw.writeHead(503, { "content-type": "application/json" });
      reply.raw.end(JSON.stringify({ error: `too many event streams (at most ${hub.maxClients})` }));
    }
  });
  app.get("/*", async (req, reply) => {
    const path = (req.params as { "*": string })["*"] || "index.html";
    // The web UI's own paths fall back to its page; a client of the JSON API gets an error, not that page.
    if (path === "api" || path.startsWith("api/")) {
      return reply.code(404).send({ error: `no API route GET /${path}; the API: ${apiRoutes.join(", ")}` });
    }
    const file = normalize(join(webRoot, path));
    if (!file.startsWith(webRoot + sep) && file !== webRoot) return reply.code(404).send({ error: "not found" });
    if (!existsSync(join(webRoot, "index.html"))) {
      return reply.code(503).type("text/plain").send(`the dashboard's web UI is not built (${webRoot} has no index.html): run \`npm run build\`. The JSON API is at /api/overview.`);
    }
    const target = existsSync(file) && statSync(file).isFile() ? file : join(webRoot, "index.html");
    return reply.type(TYPES[extname(target)] ?? "application/octet-stream").send(readFileSync(target));
  });

  return {
    app,
    pollNow,
    async listen(host, port) {
      await pollNow();
      loop();
      await app.listen({ host, port });
      const addr = app.server.address();
      if (!addr || typeof addr === "string") throw new ArborError(`dashboard: could not listen on ${host}:${port}`);
      return `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}`;
    },
    async close() {
      closed = true;
      timer?.cancel();
      hub.close();
      await polling?.catch(() => undefined);
      await app.close();
    },
  };
}

function overviewOf(s: Snapshot, seq: number, time: number, mode: Overview["mode"]): Overview {
  return { mode, seq, time, runs: s.runs, programCounts: countByStatePhase(s.programs), programsTotal: s.programs.length, engines: s.engines, gateway: s.gateway, sandboxPool: s.sandboxPool, curves: s.curves, heldOut: s.heldOut, highlights: s.highlights, errors: s.errors };
}

function countByStatePhase(rows: readonly ProgramRow[]): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const p of rows) {
    const byPhase = (out[p.state] ??= {});
    const phase = p.phase ?? "none";
    byPhase[phase] = (byPhase[phase] ?? 0) + 1;
  }
  return out;
}

/** The programs matching the filter (state, phase — `none` for no live phase — and run), one page of them. */
export function programsPage(all: readonly ProgramRow[], f: { state?: string; phase?: string; run?: string }, offset: number, limit: number): ProgramsPage {
  const rows = all.filter((p) => (f.state === undefined || p.state === f.state) && (f.phase === undefined || (p.phase ?? "none") === f.phase) && (f.run === undefined || p.runId === f.run));
  return { counts: countByStatePhase(rows), total: rows.length, offset, rows: rows.slice(offset, offset + limit) };
}
