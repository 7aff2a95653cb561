// `arbor serve trainer-api --cluster cluster.yaml`: the trainer protocol (docs/trainers.md) as its own service.
// It takes the batches the orchestrator publishes on the broker (loop/brokered-trainer.ts) and serves them to
// trainers (`arbor train-worker`, python/arbor_client, Megatron/FSDP loops); a trainer's announced weights are
// loaded on every engine of the cluster file before its POST /v1/weights answers, and its ack of a batch is
// published (`batch-acked`, with the version the engines serve) before the batch's work is acked, so the
// orchestrator's step ends exactly once. A batch whose ack was already published (the trainer-api died after
// publishing) is acked without being served again. One run trains at a time: the batches of an orchestrator that a
// later one superseded (`orchestrator-started`: a killed run's batch, never acked) are dropped, taken back from
// trainers if offered, and no weights are announced while no batch is out. GET /healthz, /readyz; SIGTERM drains: no
// new batch is taken, a batch out with a trainer gets `--drain-ms` for its ack, else it goes back to the queue for
// another instance.
import { lineLog, processLog } from "../core/logger.js";
import { readFile } from "node:fs/promises";
import { JetStreamEventBus } from "../broker/jetstream-event-bus.js";
import { JetStreamWorkQueue } from "../broker/jetstream-work-queue.js";
import type { WorkMessage } from "../broker/work-queue.js";
import { createTrainerServer, type StepMetrics } from "../batch/trainer-server.js";
import type { ExportedBatch } from "../batch/export-arrow.js";
import { clusterBroker, clusterStreams, loadClusterConfig } from "../core/cluster-config.js";
import { RecentSet } from "../core/recent-set.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { registerServiceProbes } from "../core/service-probes.js";
import type { BatchWork, TrainerEvents } from "../loop/brokered-trainer.js";
import { announcedWeightSync } from "../loop/announced-weight-sync.js";
import { OrchestratorSessions } from "../loop/orchestrator-sessions.js";
import { fleetWeightSync } from "../loop/fleet-weight-sync.js";
import { clusterSyncedEngines } from "./cluster-services.js";
import { serveUntilSignalled, workProbes } from "./service-lifecycle.js";

/** Acked batch ids remembered (the event stream keeps 10,000 events; a redelivery is of a recent batch). */
const MAX_REMEMBERED_ACKS = 10_000;

export interface ServeTrainerApiOptions {
  cluster: string;
  /** On SIGTERM, longest wait for a trainer's ack of the batch it holds, ms. */
  drainMs: number;
  log?: (line: string) => void;
}

/** Batches out at once (taken from the broker and offered to trainers). */
const BATCHES_AT_ONCE = 2;

/** A held batch's end when its orchestrator was superseded: no ack is published, the work is done. */
const DROPPED = Symbol("dropped");

/** Connect, serve the trainer protocol and take batches until a signal; resolves once drained and closed. */
export async function serveTrainerApiCommand(o: ServeTrainerApiOptions): Promise<void> {
  const log = o.log ?? lineLog(processLog("trainer-api"));
  const cfg = loadClusterConfig(o.cluster);
  const broker = clusterBroker(cfg, "arbor serve trainer-api");
  const streams = clusterStreams(cfg);
  const engines = clusterSyncedEngines(cfg);
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async (): Promise<void> => {
    for (const c of closers.reverse()) await c().catch((e: unknown) => log(`trainer-api: while closing: ${e instanceof Error ? e.message : String(e)}`));
  };
  try {
    const bus = await JetStreamEventBus.connect<TrainerEvents>(broker.url, { stream: streams.events, duplicateWindowMs: broker.duplicateWindowMs });
    closers.push(() => bus.close());
    const weights = announcedWeightSync(fleetWeightSync({ engines, inFlight: cfg.engines[0]?.inFlightOnWeightSwitch ?? "finish", external: [], log }), bus);
    // Acks already published (replayed from the bus), so a redelivered batch is never served twice: as many as the
    // bus keeps, not one per batch for as long as the service runs.
    const published = new RecentSet<string>(MAX_REMEMBERED_ACKS);
    const replayed = await bus.subscribe("batch-acked", (ev) => void published.add(ev.data.batchId), { replay: "all" });
    closers.push(() => replayed.close());
    // A held batch's ack, with the step's metrics the trainer reported (passed on to the orchestrator), or its drop.
    const held = new Map<string, { session: string | undefined; settle: (metrics: StepMetrics | undefined | typeof DROPPED) => void }>();
    // Orchestrator sessions a later one superseded (in the order they started, replayed from the bus at start).
    const sessions = new OrchestratorSessions();
    const server = createTrainerServer({
      capacity: BATCHES_AT_ONCE,
      leaseMs: cfg.trainerApi.leaseMs,
      log,
      onWeights: async (w) => {
        // Weights are trained on a batch out with a trainer: one withdrawn meanwhile must not reach the engines.
        if (server.stats().inFlight === 0) throw new ArborError("no batch is out with a trainer (one withdrawn because its run was superseded, or none taken): weights are announced for a batch being trained", "trainer_protocol");
        await weights.load(w.modelPath, w.policyVersion);
        log(`trainer-api: every engine serves policy version ${w.policyVersion} (${w.modelPath})`);
      },
      onBatch: (event, id, metrics) => {
        if (event === "acked") held.get(id)?.settle(metrics);
      },
    });
    closers.push(() => server.app.close());
    const started = await bus.subscribe(
      "orchestrator-started",
      (ev) => {
        sessions.started(ev.data.session);
        for (const [id, h] of held) {
          if (!sessions.isSuperseded(h.session)) continue;
          server.withdraw(id);
          h.settle(DROPPED);
          log(`trainer-api: batch ${id} withdrawn: its orchestrator was superseded (run ${ev.data.runId} started)`);
        }
      },
      { replay: "all" },
    );
    closers.push(() => started.close());
    const queue = await JetStreamWorkQueue.connect<BatchWork>(broker.url, { stream: streams.batches, ackWaitMs: broker.ackWaitMs, maxDeliver: broker.maxDeliver, duplicateWindowMs: broker.duplicateWindowMs });
    closers.push(() => queue.close());
    const serveBatch = async (m: WorkMessage<BatchWork>): Promise<void> => {
      const w = m.payload;
      if (published.has(w.batchId)) return;
      if (sessions.isSuperseded(w.session)) {
        log(`trainer-api: batch ${w.batchId} dropped: its orchestrator was superseded by a later one`);
        return;
      }
      let batch: ExportedBatch;
      try {
        batch = JSON.parse(await readFile(w.path, "utf8")) as ExportedBatch;
      } catch (e) {
        throw new ArborError(`trainer-api: batch ${w.batchId}: cannot read ${w.path} (the orchestrator's output folder must be shared with the trainer-api): ${(e as Error).message}`, "trainer_protocol");
      }
      // The orchestrator knows what the engines serve: the next announcement must be above it.
      server.setPolicy(w.policyVersion, w.modelPath, w.runId);
      const acked = new Promise<StepMetrics | undefined | typeof DROPPED>((settle) => held.set(w.batchId, { session: w.session, settle }));
      const beat = setInterval(() => void m.inProgress().catch(() => undefined), Math.max(500, Math.floor(broker.ackWaitMs / 3)));
      try {
        server.offer(batch);
        log(`trainer-api: batch ${w.batchId} offered (${batch.samples.length} samples; engines at version ${w.policyVersion})`);
        const metrics = await acked;
        if (metrics === DROPPED) return;
        const stats = server.stats();
        await bus.publish("batch-acked", { batchId: w.batchId, policyVersion: stats.policyVersion, modelPath: stats.modelPath, ...(metrics ? { metrics } : {}) }, `acked:${w.batchId}`);
        published.add(w.batchId);
      } finally {
        clearInterval(beat);
        held.delete(w.batchId);
      }
    };
    const consumer = queue.consume(serveBatch, { maxInFlight: BATCHES_AT_ONCE, drainTimeoutMs: Math.max(1, o.drainMs), onError: (e) => log(`trainer-api: batches: ${e.message}`) });
    const http = registerServiceProbes(server.app, { clock: realClock, notReady: () => undefined, refuseWhileDraining: () => undefined });
    const probes = workProbes(http, {
      inFlight: () => consumer.inFlight,
      settled: async (ms) => {
        let timer: NodeJS.Timeout | undefined;
        const left = await Promise.race([consumer.close().then(() => 0, () => consumer.inFlight), new Promise<number>((r) => (timer = setTimeout(() => r(consumer.inFlight), ms)))]);
        clearTimeout(timer);
        // What is left goes back to the queue (unacked) when this process closes: another instance serves it.
        if (left > 0) await consumer.abandon();
        return left;
      },
    });
    const url = await server.app.listen({ host: cfg.trainerApi.host, port: cfg.trainerApi.port });
    log(`trainer-api listening on ${url} (trainer protocol /v1/batches/next, /v1/weights; /healthz, /readyz); batches from ${streams.batches} at ${broker.url}; weights loaded on ${engines.map((e) => e.name).join(", ") || "no engine"}`);
    await serveUntilSignalled({ name: "trainer-api", probes, drainMs: o.drainMs, close: closeAll, log });
  } catch (e) {
    await closeAll();
    throw e;
  }
}
