// Weights & Biases as an optional sink of a run's metrics (config `tracking.wandb`), over the HTTP API the
// official clients use (wandb-js src/internal/api.ts and filestream.ts): the run is created by the GraphQL
// mutation `UpsertBucket` (the default entity from the `Viewer` query when none is configured), its config
// sent as W&B's `{key: {value, desc}}` JSON string; each metrics line is a row of `wandb-history.jsonl` (with
// `_step`, `_runtime`, `_timestamp`) posted to the run's file stream with its offset, beside the latest
// `wandb-summary.json`; the end posts `{complete: true, exitcode}`. Authentication is HTTP Basic `api:<key>`
// with WANDB_API_KEY; WANDB_BASE_URL points at a self-hosted server. As with MLflow (mlflow-sink.ts), an
// unreachable server fails the run at start; later failures are retried, counted and reported, and the queue
// is bounded.
import { ArborError } from "../core/errors.js";
import { TrackingQueue, trackingRequest, type TrackingSinkOptions } from "./tracking-transport.js";

export interface WandbSinkOptions extends TrackingSinkOptions {
  /** W&B server (default WANDB_BASE_URL, else https://api.wandb.ai). */
  baseUrl?: string;
  project: string;
  /** Entity (user or team; default: the API key's default entity). */
  entity?: string;
  /** The W&B run id (Arbor's run id, made W&B-safe) and its display name. */
  runId: string;
  displayName: string;
  /** The run's config, flattened or nested. maxQueued counts history rows (default 10,000). */
  config?: Record<string, unknown>;
}

const UPSERT_BUCKET = `mutation UpsertBucket($id: String, $name: String, $project: String, $entity: String, $displayName: String, $config: JSONString, $jobType: String, $tags: [String!]) {
  upsertBucket(input: {id: $id, name: $name, modelName: $project, entityName: $entity, displayName: $displayName, config: $config, jobType: $jobType, tags: $tags}) {
    bucket { id name displayName project { id name entity { id name } } }
    inserted
  }
}`;

const VIEWER = `query Viewer { viewer { id entity } }`;

/** A W&B run id from any string: W&B ids use letters, digits, '-' and '_' (other characters become '-'), 128 at most. */
export function wandbRunId(s: string): string {
  return s.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 128);
}

/** A run on a W&B server; see the file header. */
export class WandbSink {
  private readonly queue: TrackingQueue<string>;
  private summary: Record<string, number> = {};
  /** The history file's next line number on the server. */
  private offset = 0;
  private readonly started: number;

  private constructor(
    private readonly o: WandbSinkOptions & { baseUrl: string },
    private readonly auth: string,
    /** The run's path on the server: entity/project/run id. */
    readonly path: { entity: string; project: string; run: string },
  ) {
    this.started = o.clock.now();
    this.queue = new TrackingQueue<string>({
      max: o.maxQueued ?? 10_000,
      batch: Number.POSITIVE_INFINITY,
      send: async (content) => {
        const offset = this.offset;
        this.offset += content.length;
        await this.post(this.streamUrl(), {
          files: { "wandb-history.jsonl": { offset, content }, "wandb-summary.json": { offset: 0, content: [JSON.stringify(this.summary)] } },
        });
      },
      log: (n, e) => o.log(`tracking wandb: ${n} history row(s) not logged: ${e.message}`),
      // Dropped rows still take their place in the history file: the offsets stay the server's.
      onDrop: (n) => (this.offset += n),
    });
  }

  /** The W&B server a sink with these options reports to: `baseUrl`, else WANDB_BASE_URL, else W&B's cloud. */
  static baseUrl(o: Pick<WandbSinkOptions, "baseUrl" | "env">): string {
    return (o.baseUrl ?? (o.env ?? process.env).WANDB_BASE_URL ?? "https://api.wandb.ai").replace(/\/+$/, "");
  }

  /** Create (upsert) the run with its config. */
  static async start(o: WandbSinkOptions): Promise<WandbSink> {
    const env = o.env ?? process.env;
    const baseUrl = WandbSink.baseUrl(o);
    if (!/^https?:\/\//.test(baseUrl)) throw new ArborError(`tracking.wandb.baseUrl: must be an http(s) URL, got '${baseUrl}'`, "config");
    const key = env.WANDB_API_KEY;
    if (!key) throw new ArborError("tracking.wandb: set WANDB_API_KEY to your W&B API key", "config");
    const auth = `Basic ${Buffer.from(`api:${key}`).toString("base64")}`;
    const run = wandbRunId(o.runId);
    const probe = new WandbSink({ ...o, baseUrl }, auth, { entity: o.entity ?? "", project: o.project, run });
    let entity = o.entity;
    if (entity === undefined) {
      const viewer = (await probe.graphql(VIEWER, {})) as { viewer?: { entity?: string } };
      entity = viewer.viewer?.entity ?? undefined;
      if (!entity) throw new ArborError(`W&B at ${baseUrl}: no default entity for this API key; set tracking.wandb.entity`, "config");
    }
    const config = JSON.stringify(Object.fromEntries(Object.entries(o.config ?? {}).map(([k, v]) => [k, { value: v, desc: null }])));
    const r = (await probe.graphql(UPSERT_BUCKET, { name: run, project: o.project, entity, displayName: o.displayName, config, jobType: "rl", tags: ["arbor"] })) as {
      upsertBucket?: { bucket?: { name?: string; project?: { name?: string; entity?: { name?: string } } } };
    };
    const bucket = r.upsertBucket?.bucket;
    if (!bucket?.name) throw new ArborError(`W&B at ${baseUrl}: UpsertBucket answered without the run`, "unreachable");
    const sink = new WandbSink({ ...o, baseUrl }, auth, { entity: bucket.project?.entity?.name ?? entity, project: bucket.project?.name ?? o.project, run: bucket.name });
    o.log(`tracking wandb: run ${sink.path.entity}/${sink.path.project}/${sink.path.run} at ${baseUrl}`);
    return sink;
  }

  /** Queue one history row: the step's scalars (non-finite values left out). */
  log(step: number, scalars: Record<string, number>, time: number): void {
    const row: Record<string, number> = {};
    for (const [k, v] of Object.entries(scalars)) if (Number.isFinite(v)) row[k] = v;
    Object.assign(this.summary, row);
    this.queue.push(JSON.stringify({ ...row, _step: step, _runtime: (time - this.started) / 1000, _timestamp: time / 1000 }));
  }

  /** Post what is queued, then mark the file stream complete (exit code 0 for FINISHED, 1 otherwise). Never throws. */
  async finish(status: "FINISHED" | "FAILED" | "KILLED"): Promise<{ dropped: number; failed: number }> {
    await this.queue.flush();
    try {
      await this.post(this.streamUrl(), { complete: true, exitcode: status === "FINISHED" ? 0 : status === "KILLED" ? 255 : 1 });
    } catch (e) {
      this.o.log(`tracking wandb: could not mark run ${this.path.run} complete: ${(e as Error).message}`);
    }
    const { dropped, failed } = this.queue;
    if (dropped + failed > 0) this.o.log(`tracking wandb: ${failed} history row(s) not accepted, ${dropped} dropped from a full queue (metrics.jsonl has them all)`);
    return { dropped, failed };
  }

  private streamUrl(): string {
    const { entity, project, run } = this.path;
    return `${this.o.baseUrl}/files/${encodeURIComponent(entity)}/${encodeURIComponent(project)}/${encodeURIComponent(run)}/file_stream`;
  }

  /** A GraphQL request; GraphQL errors in a 200 answer are errors too. */
  private async graphql(query: string, variables: Record<string, unknown>): Promise<unknown> {
    const r = (await this.post(`${this.o.baseUrl}/graphql`, { query, variables })) as { data?: unknown; errors?: { message?: string }[] };
    if (r.errors?.length) throw new ArborError(`W&B GraphQL: ${r.errors.map((e) => e.message).join("; ")}`, "config");
    return r.data ?? {};
  }

  /** POST JSON, retried on network errors, 5xx and 429; a 4xx is an error naming the status. */
  private post(url: string, body: unknown): Promise<unknown> {
    const headers = { "content-type": "application/json", authorization: this.auth };
    return trackingRequest(this.o, { method: "POST", url, headers, body, what: `W&B ${url.replace(this.o.baseUrl, "")}` });
  }
}
