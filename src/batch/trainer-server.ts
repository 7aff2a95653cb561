// The trainer protocol over HTTP (fastify), a thin shell around a BatchQueue:
//   GET  /v1/batches/next        → 200 Arrow IPC file (headers x-arbor-batch-id, x-arbor-schema) | 204 none queued;
//                                   ?format=safetensors: the batch's prefix tree as safetensors (arbor.tree.v2), for
//                                   trainers that read tensors with numpy alone (python/arbor_client)
//   POST /v1/batches/:id/ack     → the trainer consumed the batch; optional JSON body {metrics: {loss, grad_norm,
//                                   entropy}}: what its step measured (numbers or null), handed to onBatch
//   POST /v1/batches/:id/requeue → give it back (e.g. the trainer is shutting down)
//   POST /v1/batches/:id/heartbeat → the trainer still works on it: its lease (batch-leases.ts) starts again
//   POST /v1/weights             → {policy_version, model_path, batch_id?}: a new version, trained on the batch, is
//                                   ready; calls the onWeights hook (wired by the lead to the engines' /v1/load_weights)
//   GET  /v1/stats               → queue counters, token totals, the current policy version, its weights' path and the run
import Fastify, { type FastifyInstance } from "fastify";
import { z } from "../core/zod.js";
import type { Clock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { BatchLeases, DEFAULT_BATCH_LEASE_MS, type LeaseOutcome } from "./batch-leases.js";
import { BatchQueue, type BatchQueueStats } from "./batch-queue.js";
import { ARROW_SCHEMA_VERSION, batchToArrow, type ExportedBatch } from "./export-arrow.js";
import { batchToSafetensors, SAFETENSORS_SCHEMA_VERSION } from "./export-safetensors.js";
import { buildTreeBatch } from "./tree/tree-batch.js";

/** A new policy version announced by a trainer. */
export interface WeightsAnnouncement {
  policyVersion: number;
  modelPath: string;
}

/** What GET /v1/stats returns. */
export interface TrainerServerStats extends BatchQueueStats {
  policyVersion: number;
  modelPath: string | null;
  /**
   * The run whose batches are served (null: not known yet — a trainer-api learns it with a run's first batch). A
   * trainer keeps each run's checkpoints apart by it (`arbor train-worker` writes into `<out-dir>/<run id>/`).
   */
  runId: string | null;
  /** How long a batch stays with a trainer that sends no heartbeat (POST /v1/batches/:id/heartbeat), ms. */
  leaseMs: number;
}

/** Options of {@link createTrainerServer}. */
export interface TrainerServerOptions {
  /** Most batches queued plus in flight. */
  capacity: number;
  /** Current policy version (announcements must be greater). */
  initialPolicyVersion?: number;
  /** Path of the weights the engines serve at the start (`model.path`), shown by GET /v1/stats until a trainer announces new ones. */
  initialModelPath?: string;
  /** The run whose batches this server serves, shown by GET /v1/stats (`setPolicy` changes it). */
  initialRunId?: string;
  /** Called on POST /v1/weights; its rejection becomes a 502 naming the error. */
  onWeights: (w: WeightsAnnouncement) => Promise<void> | void;
  /**
   * Told what a trainer did with a batch, once the queue has done it and before the trainer's answer leaves; an
   * ack passes the step's metrics when the trainer sent them.
   */
  onBatch?: (event: BatchEvent, batchId: string, metrics?: StepMetrics) => void;
  /**
   * A batch taken and then neither acked, requeued nor heartbeaten for this long goes back to the queue (acked, when
   * weights trained on it were announced): its trainer is gone. Default {@link DEFAULT_BATCH_LEASE_MS}.
   */
  leaseMs?: number;
  /** Runs the leases (default the real clock). */
  clock?: Clock;
  /** Told when a lease runs out and what became of the batch. */
  log?: (line: string) => void;
}

/** What a trainer's step measured, as an ack reports it (docs/batch-schema.md); a metric not sent is absent. */
export interface StepMetrics {
  loss?: number;
  gradNorm?: number;
  /** Mean policy token entropy (nats) over the batch's loss terms before the step, as the reference trainer's. */
  entropy?: number;
}

const MetricValue = z.number().finite().nullable().optional();
const AckSchema = z.object({ metrics: z.object({ loss: MetricValue, grad_norm: MetricValue, entropy: MetricValue }).strict().optional() }).strict();

/**
 * What a trainer did with a batch: took it (GET /v1/batches/next), acked it, or gave it back — or went away with it:
 * its lease ran out and the batch is back in the queue ("expired"; acked instead after an announcement).
 */
export type BatchEvent = "taken" | "acked" | "requeued" | "expired";

/** A running (or ready-to-listen) trainer protocol server. */
export interface TrainerServer {
  app: FastifyInstance;
  /** Serialise and queue a batch; throws {@link CapacityError} when the queue is full. */
  offer(batch: ExportedBatch): void;
  /**
   * The engines serve `version` from `modelPath` now, whatever was announced here before: the trainer-api's
   * orchestrator says so with each batch (a new run starts at 0; a restarted trainer-api learns the version), and
   * of which run the batch is (`runId`, left as it was when absent).
   */
  setPolicy(version: number, modelPath: string, runId?: string): void;
  /** Take an offered batch back, queued or with a trainer (whose ack or requeue of it is then refused); false when unknown. */
  withdraw(id: string): boolean;
  stats(): TrainerServerStats;
}

/** The batch formats GET /v1/batches/next serves (`?format=`); Arrow when absent. */
const FORMATS = ["arrow", "safetensors"] as const;
type BatchFormat = (typeof FORMATS)[number];

const WeightsSchema = z.object({
  policy_version: z.number({ error: "must be a number" }).int({ error: "must be an integer" }).min(0),
  model_path: z.string({ error: "must be the path of the new weights" }).min(1, { error: "must not be empty" }),
  /** The batch the weights were trained on (absent: the one batch out with a trainer, when there is one). */
  batch_id: z.string({ error: "must be the id of the batch the weights were trained on" }).min(1, { error: "must not be empty" }).optional(),
});

/** Build the server (call `app.listen` to serve). */
export function createTrainerServer(opts: TrainerServerOptions): TrainerServer {
  const queue = new BatchQueue(opts.capacity);
  let policyVersion = opts.initialPolicyVersion ?? 0;
  let modelPath: string | null = opts.initialModelPath ?? null;
  let runId: string | null = opts.initialRunId ?? null;
  // The safetensors form of each queued or in-flight batch, made at offer() from the same tree as the stats
  // (the tree is small beside the Arrow rows); dropped on ack.
  const safetensors = new Map<string, Uint8Array>();
  const app = Fastify({ logger: false, bodyLimit: 1 << 20 });
  const leases = new BatchLeases({
    leaseMs: opts.leaseMs ?? DEFAULT_BATCH_LEASE_MS,
    clock: opts.clock ?? realClock,
    onExpired: (id: string, outcome: LeaseOutcome) => {
      const s = `${leases.leaseMs / 1000} s`;
      if (outcome === "ack") {
        ackUnmeasured(id, `no ack nor heartbeat for ${s} after the weights trained on it were announced (its trainer is gone)`);
      } else {
        requeue(id);
        opts.log?.(`trainer protocol: batch ${id}: no heartbeat for ${s} (its trainer is gone): back in the queue for another trainer`);
        opts.onBatch?.("expired", id);
      }
    },
  });
  /** The batch is done: its queue entry, lease and safetensors form go (a trainer's ack, or its lease's). */
  const ack = (id: string): void => {
    queue.ack(id);
    leases.end(id);
    safetensors.delete(id);
  };
  /** The batch counts as trained without its trainer's metrics (its weights were announced; the trainer gave up), saying why. */
  const ackUnmeasured = (id: string, why: string): void => {
    ack(id);
    opts.log?.(`trainer protocol: batch ${id}: ${why}: acked without metrics`);
    opts.onBatch?.("acked", id);
  };
  /** The batch goes back to the head of the queue, without a lease (a trainer's requeue, or its lease's end). */
  const requeue = (id: string): void => {
    queue.requeue(id);
    leases.end(id);
  };
  // The leases' timers end with the server.
  app.addHook("onClose", async () => {
    for (const id of queue.inFlightIds()) leases.end(id);
  });
  const stats = (): TrainerServerStats => ({ ...queue.stats(), policyVersion, modelPath, runId, leaseMs: leases.leaseMs });

  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof CapacityError) return reply.code(503).send({ error: err.message });
    if (err instanceof ArborError) return reply.code(err.code === "not_found" ? 404 : 400).send({ error: err.message });
    const status = (err as { statusCode?: number }).statusCode ?? 500;
    return reply.code(status).send({ error: (err as Error).message });
  });

  app.get<{ Querystring: { format?: string } }>("/v1/batches/next", async (req, reply) => {
    const format = req.query.format ?? "arrow";
    // Checked before taking a batch: a malformed request must not put one in flight.
    if (!(FORMATS as readonly string[]).includes(format)) {
      return reply.code(400).send({ error: `format: '${format}' is not a batch format (known: ${FORMATS.join(", ")})` });
    }
    const b = queue.next();
    if (!b) return reply.code(204).send();
    leases.start(b.id);
    opts.onBatch?.("taken", b.id);
    const [type, schema, bytes] =
      (format as BatchFormat) === "safetensors"
        ? ["application/octet-stream", SAFETENSORS_SCHEMA_VERSION, safetensors.get(b.id) as Uint8Array]
        : ["application/vnd.apache.arrow.file", ARROW_SCHEMA_VERSION, b.bytes];
    return reply
      .header("content-type", type)
      .header("x-arbor-batch-id", b.id)
      .header("x-arbor-schema", schema)
      .send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  });

  app.post<{ Params: { id: string } }>("/v1/batches/:id/ack", async (req, reply) => {
    // Checked before the ack: a malformed body acks nothing, so the trainer can send it again.
    const parsed = AckSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return reply.code(400).send({ error: `ack body: ${issue?.path.join(".") || "body"}: ${issue?.message}` });
    }
    ack(req.params.id);
    const m = parsed.data.metrics;
    const metrics: StepMetrics | undefined =
      m === undefined
        ? undefined
        : { ...(typeof m.loss === "number" ? { loss: m.loss } : {}), ...(typeof m.grad_norm === "number" ? { gradNorm: m.grad_norm } : {}), ...(typeof m.entropy === "number" ? { entropy: m.entropy } : {}) };
    opts.onBatch?.("acked", req.params.id, metrics);
    return { ok: true };
  });

  // A batch whose weights were (or are being) announced never goes back: the engines serve what was learnt from it,
  // and a second step on it would count it twice. Its trainer gave up after announcing (an ack that failed, a client
  // timeout shorter than the engines' load): the batch is acked without metrics, as its lease's end would ack it.
  app.post<{ Params: { id: string } }>("/v1/batches/:id/requeue", async (req, reply) => {
    const id = req.params.id;
    const weights = leases.weightsOf(id);
    if (weights === "announcing") {
      return reply.code(409).send({ error: `batch '${id}': the weights trained on it are being announced, so it cannot go back to the queue (a second step on it would count it twice); ack it once the announcement answers` });
    }
    if (weights === "announced") {
      ackUnmeasured(id, "requeued after the weights trained on it were announced");
      return reply.code(409).send({ error: `batch '${id}': the weights trained on it were announced, so it was acked without metrics, not requeued (a second step on it would count it twice)` });
    }
    requeue(id);
    opts.onBatch?.("requeued", id);
    return { ok: true };
  });

  app.post<{ Params: { id: string } }>("/v1/batches/:id/heartbeat", async (req, reply) => {
    if (!leases.renew(req.params.id)) return reply.code(404).send({ error: `batch '${req.params.id}' is not out with a trainer (acked, requeued, withdrawn, or its lease ran out)` });
    return { ok: true, lease_ms: leases.leaseMs };
  });

  app.post("/v1/weights", async (req, reply) => {
    const parsed = WeightsSchema.safeParse(req.body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return reply.code(400).send({ error: `${issue?.path.join(".") || "body"}: ${issue?.message}` });
    }
    const { policy_version, model_path, batch_id } = parsed.data;
    if (policy_version <= policyVersion) {
      return reply.code(409).send({ error: `policy_version: ${policy_version} must be greater than the current policy version ${policyVersion}` });
    }
    const out = queue.inFlightIds();
    if (batch_id !== undefined && !out.includes(batch_id)) {
      // Its lease ran out (another trainer may train it now) or it was withdrawn: its weights must not be served.
      return reply.code(409).send({ error: `batch_id: batch '${batch_id}' is not out with a trainer (acked, requeued, withdrawn, or its lease ran out)` });
    }
    const trainedOn = batch_id ?? (out.length === 1 ? out[0] : undefined);
    if (trainedOn !== undefined) leases.hold(trainedOn);
    try {
      await opts.onWeights({ policyVersion: policy_version, modelPath: model_path });
    } catch (e) {
      if (trainedOn !== undefined) leases.announced(trainedOn, false);
      // The run refused the announcement itself (no batch out, none awaited): the trainer's mistake, not an engine's.
      if (e instanceof ArborError && e.code === "trainer_protocol") return reply.code(409).send({ error: `version ${policy_version}: ${e.message}` });
      return reply.code(502).send({ error: `weights hook failed for version ${policy_version}: ${(e as Error).message}` });
    }
    if (trainedOn !== undefined) leases.announced(trainedOn, true);
    policyVersion = policy_version;
    modelPath = model_path;
    return { ok: true, policy_version: policyVersion };
  });

  app.get("/v1/stats", async () => stats());

  return {
    app,
    offer(batch: ExportedBatch): void {
      const tree = buildTreeBatch(batch.samples, batch.loss);
      const s = tree.stats;
      const tensors = batchToSafetensors(batch, tree);
      queue.push({ id: batch.id, bytes: batchToArrow(batch), samples: s.samples, flatTokens: s.flatTokens, treeTokens: s.treeTokens });
      safetensors.set(batch.id, tensors);
    },
    setPolicy(version, path, run) {
      policyVersion = version;
      modelPath = path;
      if (run !== undefined) runId = run;
    },
    withdraw(id) {
      safetensors.delete(id);
      leases.end(id);
      return queue.withdraw(id);
    },
    stats,
  };
}
