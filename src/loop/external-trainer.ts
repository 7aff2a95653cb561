// The loop's Trainer port over the HTTP trainer protocol (train.trainer: external): each step serves the
// batch the loop built (src/batch/trainer-server.ts) instead of stepping the in-process reference trainer, and
// waits until a trainer in another process (`arbor train-worker`, or a Megatron/FSDP trainer) acknowledges it.
// Protocol rule (docs/batch-schema.md): the trainer announces the weights it trained on a batch
// (POST /v1/weights → every in-process engine loads them) and only then acks the batch; the version the
// engines serve at ack time is the policy of the next iteration. A requeued batch waits again; a batch nobody
// acks within `waitMs` fails the run with an error naming the URL, the batch and what is missing. What the trainer's
// step measured (loss, gradient norm, policy entropy) comes with its ack, where the trainer sends it (the PyTorch
// worker does), and goes into the step's update as the in-process trainer's would (metrics.jsonl, TensorBoard).
import type { Clock, Timer } from "../core/clock.js";
import type { ExternalTrainerConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { buildTreeBatch } from "../batch/tree/tree-batch.js";
import { createTrainerServer, type StepMetrics } from "../batch/trainer-server.js";
import type { BuiltBatch } from "../batch/build-batch.js";
import { samplesWithSignal, type RlUpdate } from "./rl-update.js";
import type { Trainer, WeightSync } from "./trainer-port.js";

/** Options of {@link startExternalTrainer}. */
export interface ExternalTrainerOptions {
  /** Where to listen and how long to wait for an ack (config `train.external`). */
  config: ExternalTrainerConfig;
  /** Loads every announced checkpoint on the run's engines (before the trainer's ack). */
  weights: WeightSync;
  /** The GGUF the engines start from (GET /v1/stats's `modelPath` until a trainer announces weights; named in the hint of a timeout error). */
  modelPath: string;
  /** Its policy version (GET /v1/stats's `policyVersion` until a trainer announces weights): a resumed run's; default 0. */
  version?: number;
  /** The run's id (GET /v1/stats's `runId`: a trainer keeps each run's checkpoints apart by it). */
  runId?: string;
  /** Told when a batch's lease runs out (its trainer is gone) and what became of the batch. */
  log?: (line: string) => void;
  clock: Clock;
  /** Aborts a wait (SIGINT/SIGTERM of the run). */
  signal?: AbortSignal;
}

/**
 * A listening trainer-protocol server driving the run's policy updates. `version` is the policy version the
 * engines serve: the last one a trainer announced (0 at the start). `step(batch)` offers exactly the batch
 * the loop built and waits until a trainer acks it; `loss`, `gradNorm` and `entropy` are what the ack
 * reported (NaN when it reported none), `clipFraction` and `kl` NaN (the protocol does not report them);
 * `stepped` says whether the version moved before the ack, and then `synced` (the engines loaded the
 * announced weights already). `close()` stops serving.
 */
export interface ExternalTrainer extends Trainer {
  /** Base URL of the trainer protocol, e.g. http://127.0.0.1:8400. */
  readonly url: string;
}

/** What the run knows about the batch it waits for. */
interface Pending {
  id: string;
  taken: number;
  requeued: number;
  /** How the batch last came back: given back by its trainer, or its lease ran out. */
  lastBack?: "requeued" | "expired";
  announced: number[];
  acked: (metrics: StepMetrics | undefined) => void;
  restart: () => void;
}

/** Start the trainer protocol server on the configured host/port; `close()` it when the run ends. */
export async function startExternalTrainer(o: ExternalTrainerOptions): Promise<ExternalTrainer> {
  const { waitMs } = o.config;
  let pending: Pending | undefined;
  let lastWeightsError: string | undefined;
  const server = createTrainerServer({
    // One batch is out per iteration; a second slot only absorbs a trainer that requeues at the wrong time.
    capacity: 2,
    initialPolicyVersion: o.version ?? 0,
    initialModelPath: o.modelPath,
    ...(o.runId !== undefined ? { initialRunId: o.runId } : {}),
    leaseMs: o.config.leaseMs,
    clock: o.clock,
    ...(o.log ? { log: o.log } : {}),
    onWeights: async (w) => {
      if (pending === undefined) {
        throw new ArborError("arbor run is not waiting for a batch; announce the weights trained on a batch before acking that batch", "trainer_protocol");
      }
      // Its batch back in the queue (requeued, or its lease ran out): weights are announced for a batch being trained.
      if (server.stats().inFlight === 0) throw new ArborError(`no batch is out with a trainer (batch '${pending.id}' is queued: given back, or its lease ran out); announce the weights trained on a batch you hold`, "trainer_protocol");
      try {
        await o.weights.load(w.modelPath, w.policyVersion);
      } catch (e) {
        lastWeightsError = `version ${w.policyVersion} from ${w.modelPath}: ${(e as Error).message}`;
        throw e;
      }
      pending.announced.push(w.policyVersion);
    },
    // What the trainer did with the batch the run waits for (other ids are a trainer's stale calls).
    onBatch: (event, id, metrics) => {
      const p = pending;
      if (p === undefined || id !== p.id) return;
      if (event === "taken") p.taken++;
      else if (event === "requeued" || event === "expired") {
        p.requeued++;
        p.lastBack = event;
        p.restart();
      } else p.acked(metrics);
    },
  });
  let url: string;
  try {
    url = await server.app.listen({ host: o.config.host, port: o.config.port });
  } catch (e) {
    await server.app.close();
    throw new ArborError(`train.external: cannot listen on ${o.config.host}:${o.config.port}: ${(e as Error).message}`, "config");
  }
  let closed = false;

  const missing = (p: Pending): string => {
    if (p.taken === 0) {
      return `no trainer took it (GET /v1/batches/next); start one, e.g. \`arbor train-worker --url ${url} --from ${o.modelPath} --out-dir <dir>\``;
    }
    const last = p.announced[p.announced.length - 1];
    const gone = `a trainer took it and went away (no heartbeat for train.external.leaseMs ${o.config.leaseMs} ms) and none took it again`;
    const state = p.taken === p.requeued ? (p.lastBack === "expired" ? gone : "a trainer gave it back (requeue) and none took it again") : last !== undefined ? `a trainer took it and announced version ${last} but did not ack it (POST /v1/batches/${p.id}/ack)` : `a trainer took it but announced no weights and did not ack it (POST /v1/weights, then POST /v1/batches/${p.id}/ack)`;
    return lastWeightsError === undefined ? state : `${state}; the last weights announcement failed: ${lastWeightsError}`;
  };

  /**
   * Start waiting for `id` (before it is offered, so that no ack goes unseen): resolves when it is acked;
   * rejects after `waitMs` without an ack (a requeue restarts the wait), on abort, or through `cancel`.
   */
  const waitForAck = (id: string): { done: Promise<StepMetrics | undefined>; cancel: (e: Error) => void } => {
    let timer: Timer | undefined;
    let settle: { resolve: (m: StepMetrics | undefined) => void; reject: (e: Error) => void } | undefined;
    let reported: StepMetrics | undefined;
    const done = new Promise<StepMetrics | undefined>((resolve, reject) => (settle = { resolve, reject }));
    const finish = (err?: Error): void => {
      timer?.cancel();
      o.signal?.removeEventListener("abort", onAbort);
      if (pending === p) pending = undefined;
      if (err) settle?.reject(err);
      else settle?.resolve(reported);
    };
    const onAbort = (): void => finish(new ArborError(`run aborted (${String((o.signal?.reason as Error | undefined)?.message)}) while waiting for the external trainer at ${url} to ack batch '${id}'`, "aborted"));
    const p: Pending = {
      id,
      taken: 0,
      requeued: 0,
      announced: [],
      acked: (metrics) => {
        reported = metrics;
        finish();
      },
      restart: () => {
        timer?.cancel();
        timer = o.clock.setTimer(waitMs, () => finish(new ArborError(`external trainer at ${url}: batch '${id}' was not acknowledged within ${waitMs} ms (train.external.waitMs): ${missing(p)}`, "trainer_timeout")));
      },
    };
    pending = p;
    p.restart();
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener("abort", onAbort, { once: true });
    return { done, cancel: (e) => finish(e) };
  };

  return {
    url,
    kind: "external",
    get version() {
      return server.stats().policyVersion;
    },
    async step(built) {
      if (closed) throw new ArborError(`external trainer at ${url} is closed`, "trainer_protocol");
      const before = server.stats().policyVersion;
      lastWeightsError = undefined;
      const wait = waitForAck(built.batch.id);
      try {
        server.offer(built.batch);
      } catch (e) {
        wait.cancel(e as Error);
      }
      const metrics = await wait.done;
      const after = server.stats();
      return externalUpdate(built, before, after.policyVersion, after.modelPath, metrics);
    },
    async close() {
      if (closed) return;
      closed = true;
      await server.app.close();
    },
  };
}

/**
 * The loop's view of a step another process took on `built`: whether the engines' version moved from `before` to
 * `after` (they serve the announced weights already: `synced`), and the batch's sizes. Loss, gradient norm and
 * entropy are what the trainer's ack reported (`metrics`), NaN where it reported none; clip fraction and KL are
 * NaN: the protocol does not report them.
 */
export function externalUpdate(built: BuiltBatch, before: number, after: number, modelPath: string | null, metrics: StepMetrics = {}): RlUpdate {
  const all = built.batch.samples;
  const useful = samplesWithSignal(all);
  const tree = useful.length > 0 ? buildTreeBatch(useful, built.batch.loss).stats : undefined;
  const stepped = after > before;
  return {
    stepped,
    ...(stepped ? { synced: true as const } : {}),
    version: after,
    ...(stepped && modelPath !== null ? { checkpoint: modelPath } : {}),
    loss: metrics.loss ?? NaN,
    gradNorm: metrics.gradNorm ?? NaN,
    clipFraction: NaN,
    kl: NaN,
    entropy: metrics.entropy ?? NaN,
    samples: all.length,
    trainedSamples: useful.length,
    treeTokens: tree?.treeTokens ?? 0,
    flatTokens: tree?.flatTokens ?? 0,
    droppedGroups: built.dropped.length,
    external: true,
  };
}
