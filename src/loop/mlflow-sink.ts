// MLflow as an optional sink of a run's metrics (config `tracking.mlflow`), through MLflow's REST API (the
// routes and limits of mlflow/server/handlers.py and docs/rest-api: experiments/get-by-name, experiments/create,
// runs/create, runs/log-batch with at most 1000 metrics and 100 params a request, runs/update). The run is created
// when the sink starts — an unreachable server fails the run there, before any rollout — and each metrics line's
// scalars (the TensorBoard tags: `reward/mean`, `train/loss`, …) are queued and posted in the background, retried
// with backoff; what still fails is counted and reported, never allowed to stop training (metrics.jsonl keeps
// every number). The queue is bounded: past `maxQueued` metrics the oldest are dropped and counted.
// Credentials are MLflow's own variables: MLFLOW_TRACKING_TOKEN (bearer) or MLFLOW_TRACKING_USERNAME/PASSWORD.
import { ArborError } from "../core/errors.js";
import { TrackingQueue, trackingRequest, type TrackingSinkOptions } from "./tracking-transport.js";

/** MLflow's per-request limits (log-batch). */
export const MLFLOW_MAX_METRICS_PER_BATCH = 1000;
export const MLFLOW_MAX_PARAMS_PER_BATCH = 100;
/** MLflow 2's param value limit (characters); longer values are cut, with "…" at the end. */
export const MLFLOW_MAX_PARAM_VALUE = 6000;

export interface MlflowSinkOptions extends TrackingSinkOptions {
  /** Tracking server, e.g. http://127.0.0.1:5000 (MLFLOW_TRACKING_URI). */
  url: string;
  experiment: string;
  runName: string;
  /** Logged once as the run's params (the run config, flattened). */
  params?: Record<string, string>;
  /** Tags of the MLflow run (`arbor.run_id`, …). maxQueued counts metrics (default 100,000). */
  tags?: Record<string, string>;
}

interface Metric {
  key: string;
  value: number;
  timestamp: number;
  step: number;
}

/** Status MLflow records for a finished run. */
export type MlflowRunStatus = "FINISHED" | "FAILED" | "KILLED";

/** A run on an MLflow tracking server; see the file header. */
export class MlflowSink {
  private readonly queue: TrackingQueue<Metric>;

  private constructor(
    private readonly o: MlflowSinkOptions,
    private readonly headers: Record<string, string>,
    /** The MLflow run's id. */
    readonly runId: string,
    readonly experimentId: string,
  ) {
    this.queue = new TrackingQueue<Metric>({
      max: o.maxQueued ?? 100_000,
      batch: MLFLOW_MAX_METRICS_PER_BATCH,
      send: async (metrics) => void (await this.call("POST", "runs/log-batch", { run_id: this.runId, metrics })),
      log: (n, e) => o.log(`tracking mlflow: ${n} metric(s) not logged: ${e.message}`),
    });
  }

  /** Find or create the experiment, create the run and log its params. */
  static async start(o: MlflowSinkOptions): Promise<MlflowSink> {
    const url = o.url.replace(/\/+$/, "");
    if (!/^https?:\/\//.test(url)) throw new ArborError(`tracking.mlflow.url: must be an http(s) URL, got '${o.url}'`, "config");
    const env = o.env ?? process.env;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (env.MLFLOW_TRACKING_TOKEN) headers.authorization = `Bearer ${env.MLFLOW_TRACKING_TOKEN}`;
    else if (env.MLFLOW_TRACKING_USERNAME) headers.authorization = `Basic ${Buffer.from(`${env.MLFLOW_TRACKING_USERNAME}:${env.MLFLOW_TRACKING_PASSWORD ?? ""}`).toString("base64")}`;
    const probe = new MlflowSink({ ...o, url }, headers, "", "");
    const experimentId = await probe.experimentId_(o.experiment);
    const created = (await probe.call("POST", "runs/create", {
      experiment_id: experimentId,
      run_name: o.runName,
      start_time: Math.round(o.clock.now()),
      tags: Object.entries({ "mlflow.runName": o.runName, ...(o.tags ?? {}) }).map(([key, value]) => ({ key, value })),
    })) as { run?: { info?: { run_id?: string } } };
    const runId = created.run?.info?.run_id;
    if (typeof runId !== "string") throw new ArborError(`MLflow at ${url}: runs/create answered without run.info.run_id`, "unreachable");
    const sink = new MlflowSink({ ...o, url }, headers, runId, experimentId);
    const params = Object.entries(o.params ?? {}).map(([key, value]) => ({ key, value: value.length > MLFLOW_MAX_PARAM_VALUE ? `${value.slice(0, MLFLOW_MAX_PARAM_VALUE - 1)}…` : value }));
    for (let i = 0; i < params.length; i += MLFLOW_MAX_PARAMS_PER_BATCH) {
      await sink.call("POST", "runs/log-batch", { run_id: runId, params: params.slice(i, i + MLFLOW_MAX_PARAMS_PER_BATCH) });
    }
    o.log(`tracking mlflow: run ${runId} in experiment '${o.experiment}' (${experimentId}) at ${url}`);
    return sink;
  }

  /** Queue one step's scalars (non-finite values are left out: MLflow refuses NaN in JSON). */
  log(step: number, scalars: Record<string, number>, timestamp: number): void {
    const metrics = Object.entries(scalars)
      .filter(([, value]) => Number.isFinite(value))
      .map(([key, value]) => ({ key, value, timestamp: Math.round(timestamp), step }));
    this.queue.push(...metrics);
  }

  /** Post what is queued, then mark the run `status` with its end time. Never throws: failures are reported. */
  async finish(status: MlflowRunStatus): Promise<{ dropped: number; failed: number }> {
    await this.queue.flush();
    try {
      await this.call("POST", "runs/update", { run_id: this.runId, status, end_time: Math.round(this.o.clock.now()) });
    } catch (e) {
      this.o.log(`tracking mlflow: could not mark run ${this.runId} ${status}: ${(e as Error).message}`);
    }
    const { dropped, failed } = this.queue;
    if (dropped + failed > 0) this.o.log(`tracking mlflow: ${failed} metric(s) not accepted, ${dropped} dropped from a full queue (metrics.jsonl has them all)`);
    return { dropped, failed };
  }

  private async experimentId_(name: string): Promise<string> {
    const found = await this.call("GET", `experiments/get-by-name?experiment_name=${encodeURIComponent(name)}`, undefined, true);
    const id = (found as { experiment?: { experiment_id?: string } } | undefined)?.experiment?.experiment_id;
    if (typeof id === "string") return id;
    const created = (await this.call("POST", "experiments/create", { name })) as { experiment_id?: string };
    if (typeof created.experiment_id !== "string") throw new ArborError(`MLflow at ${this.o.url}: experiments/create answered without experiment_id`, "unreachable");
    return created.experiment_id;
  }

  /**
   * One REST call under `/api/2.0/mlflow/`, retried on network errors and 5xx/429. With `missingOk`, MLflow's
   * 404 RESOURCE_DOES_NOT_EXIST answers undefined. A 4xx is an error naming MLflow's error_code and message.
   */
  private call(method: "GET" | "POST", path: string, body: unknown, missingOk = false): Promise<unknown> {
    return trackingRequest(this.o, {
      method,
      url: `${this.o.url}/api/2.0/mlflow/${path}`,
      headers: this.headers,
      body,
      what: `MLflow ${method} ${path.split("?")[0]}`,
      accept: (status, json) => (missingOk && status === 404 && json.error_code === "RESOURCE_DOES_NOT_EXIST" ? { value: undefined } : undefined),
      detail: (json, text) => `${typeof json.error_code === "string" ? json.error_code : ""} ${typeof json.message === "string" ? json.message : text.slice(0, 200)}`.trim(),
    });
  }
}

/** Nested settings as dotted keys with string values (arrays as JSON), as MLflow params. */
export function flattenParams(value: unknown, prefix = "", out: Record<string, string> = {}): Record<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flattenParams(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (value !== undefined && prefix) {
    out[prefix] = typeof value === "string" ? value : JSON.stringify(value);
  }
  return out;
}
