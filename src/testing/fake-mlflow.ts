// A stand-in MLflow tracking server for tests, built from MLflow's REST handlers (mlflow/server/handlers.py,
// docs/rest-api): /api/2.0/mlflow/experiments/get-by-name (404 RESOURCE_DOES_NOT_EXIST), experiments/create
// (RESOURCE_ALREADY_EXISTS on a taken name), runs/create, runs/log-batch (INVALID_PARAMETER_VALUE past 1000
// metrics or 100 params, or a param logged again with another value), runs/update. Errors are MLflow's
// `{error_code, message}` bodies. It keeps what it was sent, and can fail the next requests with 503.
import Fastify, { type FastifyInstance } from "fastify";

export interface FakeMlflowRun {
  runId: string;
  experimentId: string;
  runName: string;
  tags: Record<string, string>;
  params: Record<string, string>;
  metrics: { key: string; value: number; timestamp: number; step: number }[];
  status: string;
  startTime: number;
  endTime?: number;
}

export interface FakeMlflow {
  url: string;
  experiments: Map<string, string>;
  runs: Map<string, FakeMlflowRun>;
  /** Every request: method, path and Authorization header. */
  requests: { method: string; path: string; authorization?: string }[];
  /** Answer the next `n` requests with 503. */
  failNext(n: number): void;
  close(): Promise<void>;
}

const bad = (message: string) => ({ error_code: "INVALID_PARAMETER_VALUE", message });

/** Start the stand-in on a free loopback port. */
export async function startFakeMlflow(): Promise<FakeMlflow> {
  const app: FastifyInstance = Fastify({ logger: false });
  const experiments = new Map<string, string>();
  const runs = new Map<string, FakeMlflowRun>();
  const requests: FakeMlflow["requests"] = [];
  let failing = 0;
  app.addHook("onRequest", async (req, reply) => {
    requests.push({ method: req.method, path: req.url, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
    if (failing > 0) {
      failing--;
      await reply.code(503).send({ error_code: "TEMPORARILY_UNAVAILABLE", message: "try again" });
    }
  });
  const base = "/api/2.0/mlflow";
  app.get(`${base}/experiments/get-by-name`, async (req, reply) => {
    const name = (req.query as { experiment_name?: string }).experiment_name;
    if (!name) return reply.code(400).send(bad("Missing value for required parameter 'experiment_name'."));
    const id = experiments.get(name);
    if (id === undefined) return reply.code(404).send({ error_code: "RESOURCE_DOES_NOT_EXIST", message: `Could not find experiment with name '${name}'` });
    return { experiment: { experiment_id: id, name, lifecycle_stage: "active" } };
  });
  app.post(`${base}/experiments/create`, async (req, reply) => {
    const { name } = req.body as { name?: string };
    if (!name) return reply.code(400).send(bad("Missing value for required parameter 'name'."));
    if (experiments.has(name)) return reply.code(400).send({ error_code: "RESOURCE_ALREADY_EXISTS", message: `Experiment '${name}' already exists.` });
    const id = String(experiments.size + 1);
    experiments.set(name, id);
    return { experiment_id: id };
  });
  app.post(`${base}/runs/create`, async (req, reply) => {
    const b = req.body as { experiment_id?: string; run_name?: string; start_time?: number; tags?: { key: string; value: string }[] };
    if (!b.experiment_id || ![...experiments.values()].includes(b.experiment_id)) return reply.code(404).send({ error_code: "RESOURCE_DOES_NOT_EXIST", message: `No Experiment with id=${b.experiment_id}` });
    const runId = `run${runs.size + 1}`.padEnd(32, "0");
    const run: FakeMlflowRun = { runId, experimentId: b.experiment_id, runName: b.run_name ?? "", tags: Object.fromEntries((b.tags ?? []).map((t) => [t.key, t.value])), params: {}, metrics: [], status: "RUNNING", startTime: b.start_time ?? 0 };
    runs.set(runId, run);
    return { run: { info: { run_id: runId, experiment_id: b.experiment_id, status: "RUNNING", start_time: run.startTime }, data: {} } };
  });
  app.post(`${base}/runs/log-batch`, async (req, reply) => {
    const b = req.body as { run_id?: string; metrics?: FakeMlflowRun["metrics"]; params?: { key: string; value: string }[] };
    const run = b.run_id ? runs.get(b.run_id) : undefined;
    if (!run) return reply.code(404).send({ error_code: "RESOURCE_DOES_NOT_EXIST", message: `Run '${b.run_id}' not found` });
    const metrics = b.metrics ?? [];
    const params = b.params ?? [];
    if (metrics.length > 1000) return reply.code(400).send(bad(`A batch logging request can contain at most 1000 metrics. Got ${metrics.length} metrics.`));
    if (params.length > 100) return reply.code(400).send(bad(`A batch logging request can contain at most 100 params. Got ${params.length} params.`));
    for (const m of metrics) {
      if (typeof m.value !== "number" || !Number.isInteger(m.timestamp) || !Number.isInteger(m.step)) return reply.code(400).send(bad(`Invalid metric ${JSON.stringify(m)}`));
    }
    for (const p of params) {
      if (p.value.length > 6000) return reply.code(400).send(bad(`Param value '${p.value.slice(0, 20)}…' had length ${p.value.length}, which exceeded length limit of 6000`));
      if (run.params[p.key] !== undefined && run.params[p.key] !== p.value) return reply.code(400).send(bad(`Changing param values is not allowed. Param with key='${p.key}' was already logged`));
    }
    for (const p of params) run.params[p.key] = p.value;
    run.metrics.push(...metrics);
    return {};
  });
  app.post(`${base}/runs/update`, async (req, reply) => {
    const b = req.body as { run_id?: string; status?: string; end_time?: number };
    const run = b.run_id ? runs.get(b.run_id) : undefined;
    if (!run) return reply.code(404).send({ error_code: "RESOURCE_DOES_NOT_EXIST", message: `Run '${b.run_id}' not found` });
    if (b.status !== undefined && !["RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"].includes(b.status)) return reply.code(400).send(bad(`Invalid status ${b.status}`));
    if (b.status) run.status = b.status;
    if (b.end_time !== undefined) run.endTime = b.end_time;
    return { run_info: { run_id: run.runId, status: run.status, end_time: run.endTime } };
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { url, experiments, runs, requests, failNext: (n) => void (failing = n), close: () => app.close() };
}
