// A stand-in W&B server for tests, built from what the official clients send (wandb-js src/internal/api.ts,
// filestream.ts): POST /graphql answering the `Viewer` query and the `UpsertBucket` mutation (HTTP Basic
// `api:<key>` required: 401 otherwise), and POST /files/:entity/:project/:run/file_stream taking history rows at
// their offsets (a row at an offset already written replaces it, as the server does), the summary, and
// `{complete, exitcode}`. It keeps what it was sent, and can fail the next requests with 503.
import Fastify from "fastify";

export interface FakeWandbRun {
  entity: string;
  project: string;
  name: string;
  displayName: string;
  config: Record<string, { value: unknown; desc: unknown }>;
  /** History rows by offset. */
  history: Record<string, unknown>[];
  summary: Record<string, unknown>;
  complete?: { exitcode: number };
}

export interface FakeWandb {
  url: string;
  apiKey: string;
  runs: Map<string, FakeWandbRun>;
  failNext(n: number): void;
  close(): Promise<void>;
}

/** Start the stand-in on a free loopback port; `apiKey` is the only key it accepts. */
export async function startFakeWandb(apiKey = "test-key-0123456789"): Promise<FakeWandb> {
  const app = Fastify({ logger: false });
  const runs = new Map<string, FakeWandbRun>();
  let failing = 0;
  app.addHook("onRequest", async (req, reply) => {
    if (failing > 0) {
      failing--;
      return reply.code(503).send({ error: "unavailable" });
    }
    if (req.headers.authorization !== `Basic ${Buffer.from(`api:${apiKey}`).toString("base64")}`) return reply.code(401).send({ errors: [{ message: "user is not logged in" }] });
    return undefined;
  });
  app.post("/graphql", async (req) => {
    const { query, variables } = req.body as { query: string; variables: Record<string, unknown> };
    if (/query Viewer\b/.test(query)) return { data: { viewer: { id: "u1", entity: "arbor-user" } } };
    if (/mutation UpsertBucket\b/.test(query)) {
      const v = variables as { name: string; project: string; entity: string; displayName?: string; config?: string };
      if (!v.project) return { errors: [{ message: "project is required" }] };
      const key = `${v.entity}/${v.project}/${v.name}`;
      const run: FakeWandbRun = runs.get(key) ?? { entity: v.entity, project: v.project, name: v.name, displayName: v.displayName ?? v.name, config: {}, history: [], summary: {} };
      if (v.config !== undefined) run.config = JSON.parse(v.config) as FakeWandbRun["config"];
      const inserted = !runs.has(key);
      runs.set(key, run);
      return { data: { upsertBucket: { bucket: { id: key, name: run.name, displayName: run.displayName, project: { id: v.project, name: v.project, entity: { id: v.entity, name: v.entity } } }, inserted } } };
    }
    return { errors: [{ message: "unknown operation" }] };
  });
  app.post("/files/:entity/:project/:run/file_stream", async (req, reply) => {
    const p = req.params as { entity: string; project: string; run: string };
    const run = runs.get(`${p.entity}/${p.project}/${p.run}`);
    if (!run) return reply.code(404).send({ error: "run not found" });
    const b = req.body as { files?: Record<string, { offset: number; content: string[] }>; complete?: boolean; exitcode?: number };
    if (b.complete) {
      run.complete = { exitcode: b.exitcode ?? 0 };
      return { exitcode: null, limits: {} };
    }
    const h = b.files?.["wandb-history.jsonl"];
    if (h) h.content.forEach((line, i) => (run.history[h.offset + i] = JSON.parse(line) as Record<string, unknown>));
    const s = b.files?.["wandb-summary.json"];
    if (s?.content[0]) run.summary = JSON.parse(s.content[0]) as Record<string, unknown>;
    return { exitcode: null, limits: {} };
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { url, apiKey, runs, failNext: (n) => void (failing = n), close: () => app.close() };
}
