// The loop's Trainer port when the trainer protocol is its own service (`arbor serve trainer-api`, issue 16): each
// step writes the built batch where the deployment shares files (as checkpoints are shared with the engines),
// publishes it as work on the broker under the batch's id, and waits for the trainer-api's `batch-acked` event —
// sent once a trainer took the batch, announced its weights (which the trainer-api loaded on every engine) and
// acked it. The trainer-api acks the work only after that event, and skips a batch whose ack it has seen, so a
// trainer-api that dies mid-batch loses nothing and trains nothing twice. A deployment trains one run at a time: each
// orchestrator process announces itself as it starts (`orchestrator-started`, its session, which its batches carry),
// and the trainer-api drops the batches of the ones before it (a killed orchestrator's batch, never acked, would
// otherwise be trained later and change the engines' weights under the next run).
import { randomUUID } from "node:crypto";
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ArborEvents, EventBus, EventSubscription } from "../broker/event-bus.js";
import type { StepMetrics } from "../batch/trainer-server.js";
import type { WorkQueue } from "../broker/work-queue.js";
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { externalUpdate } from "./external-trainer.js";
import type { Trainer } from "./trainer-port.js";
import { fileSafeName } from "../core/file-safe-name.js";

/** One batch for the trainer-api: where its JSON is, and the weights the engines serve as it is offered. */
export interface BatchWork {
  v: 1;
  batchId: string;
  /** The batch (`ExportedBatch` as JSON) on the deployment's shared files. */
  path: string;
  /** The policy version the engines serve now: the trainer-api's next announcement must be above it. */
  policyVersion: number;
  modelPath: string;
  /** The orchestrator process that published it (absent: an orchestrator from before sessions; never dropped). */
  session?: string;
  /** The run the batch is of (absent: an orchestrator from before this field). */
  runId?: string;
}

/** An orchestrator process started training on the deployment: batches of the ones before it are stale. */
export interface OrchestratorStartedEvent {
  session: string;
  runId: string;
}

/** The trainer-api's report that a trainer acked a batch, with the version the engines serve from then on. */
export interface BatchAckedEvent {
  batchId: string;
  policyVersion: number;
  modelPath: string | null;
  /** The step's loss, gradient norm and entropy as the trainer's ack reported them (absent: it reported none). */
  metrics?: StepMetrics;
}

/** Events between the orchestrator and the trainer-api. */
export interface TrainerEvents extends ArborEvents {
  "batch-acked": BatchAckedEvent;
  "orchestrator-started": OrchestratorStartedEvent;
}

export interface BrokeredTrainerOptions {
  queue: WorkQueue<BatchWork>;
  bus: EventBus<TrainerEvents>;
  /** Where batches are written (a folder the trainer-api reads). */
  dir: string;
  /** The weights the engines serve at the start. */
  modelPath: string;
  /** Their policy version (a resumed run's; default 0). */
  version?: number;
  /** The run's id (announced with the orchestrator's start). */
  runId: string;
  /** How long a batch may wait for its ack before the run fails (train.external.waitMs). */
  waitMs: number;
  clock: Clock;
  signal?: AbortSignal;
}

/** Start listening for acks and return the Trainer; `close()` stops listening. */
export async function startBrokeredTrainer(o: BrokeredTrainerOptions): Promise<Trainer> {
  mkdirSync(o.dir, { recursive: true });
  let version = o.version ?? 0;
  let modelPath = o.modelPath;
  const waiting = new Map<string, (ev: BatchAckedEvent) => void>();
  const subscription: EventSubscription = await o.bus.subscribe("batch-acked", (ev) => waiting.get(ev.data.batchId)?.(ev.data), { replay: "new" });
  const session = randomUUID();
  await o.bus.publish("orchestrator-started", { session, runId: o.runId }, `started:${session}`);
  let closed = false;
  return {
    kind: "external",
    get version() {
      return version;
    },
    async step(built) {
      if (closed) throw new ArborError("the trainer-api client is closed", "trainer_protocol");
      const id = built.batch.id;
      const path = join(o.dir, `${fileSafeName(id)}.json`);
      // Whole or absent: the trainer-api never reads half a batch.
      writeFileSync(`${path}.tmp`, JSON.stringify(built.batch));
      renameSync(`${path}.tmp`, path);
      const before = version;
      let timer: Timer | undefined;
      let onAbort: (() => void) | undefined;
      let metrics: StepMetrics | undefined;
      const acked = new Promise<BatchAckedEvent>((resolve, reject) => {
        waiting.set(id, resolve);
        timer = o.clock.setTimer(o.waitMs, () => reject(new ArborError(`trainer-api: batch '${id}' was not acknowledged within ${o.waitMs} ms (train.external.waitMs); is arbor serve trainer-api running, and a trainer connected to it?`, "trainer_timeout")));
        onAbort = () => reject(new ArborError(`run aborted while waiting for the trainer-api to ack batch '${id}'`, "aborted"));
        if (o.signal?.aborted) onAbort();
        else o.signal?.addEventListener("abort", onAbort, { once: true });
      });
      try {
        await o.queue.publish(id, { v: 1, batchId: id, path, policyVersion: version, modelPath, session, runId: o.runId });
        const ev = await acked;
        version = ev.policyVersion;
        if (ev.modelPath !== null) modelPath = ev.modelPath;
        metrics = ev.metrics;
      } finally {
        timer?.cancel();
        if (onAbort) o.signal?.removeEventListener("abort", onAbort);
        waiting.delete(id);
      }
      return externalUpdate(built, before, version, modelPath, metrics);
    },
    async close() {
      if (closed) return;
      closed = true;
      await subscription.close();
    },
  };
}
