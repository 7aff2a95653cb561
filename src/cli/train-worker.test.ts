// The train-worker loop against a real trainer protocol server (createTrainerServer over HTTP) with batches
// from the real batch builder: a batch with signal is stepped on, checkpointed, announced and only then
// acked; a batch without signal is acked without an announcement; a worker started again on a resumed run (from
// the server's model path with Adam's state: the same step); the server's next run (checkpoints in a folder per
// run, the earlier run's kept); --batches, a server that goes away, a failing announcement (the batch is requeued)
// and bad options.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { buildTrainingBatch } from "../batch/build-batch.js";
import type { ExportedBatch } from "../batch/export-arrow.js";
import { createTrainerServer, type TrainerServer, type StepMetrics, type TrainerServerStats, type WeightsAnnouncement } from "../batch/trainer-server.js";
import { TrainerClient } from "../batch/trainer-client.js";
import { readGguf } from "../model/gguf.js";
import { specTrajectories, type BatchSpec } from "../testing/test-batches.js";
import { runTrainWorker } from "./train-worker.js";

const FROM = "models/calc-sft.gguf";
const dir = mkdtempSync(join(tmpdir(), "arbor-train-worker-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A GRPO batch of one group of three two-call programs with the given rewards (equal rewards: no signal). */
function batch(id: string, rewards: number[]): ExportedBatch {
  const call = (output: number[]) => ({ output, tool: [40, 41], logprobs: output.map(() => -2.5) });
  const spec: BatchSpec = {
    prompts: [[30, 31, 32, 33]],
    groups: [rewards.map((reward, p) => ({ forkFrom: 0, forkDepth: p, calls: [call([50 + p, 60, 61]), call([70, 71 + p])], reward }))],
    estimator: "grpo",
    mode: "merged",
  };
  const { trajectories, groups } = specTrajectories(spec);
  return buildTrainingBatch({ id, trajectories, groups, estimator: "grpo" }).batch;
}

interface Served {
  server: TrainerServer;
  url: string;
  /** Each announcement with the queue's state when it arrived. */
  announced: (WeightsAnnouncement & { at: TrainerServerStats })[];
  /** Each ack with the step metrics it carried. */
  acks: { id: string; metrics?: StepMetrics }[];
}

const servers: TrainerServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.app.close()));
});

async function serve(batches: ExportedBatch[], onWeights?: (w: WeightsAnnouncement) => void, runId?: string): Promise<Served> {
  const announced: Served["announced"] = [];
  const acks: Served["acks"] = [];
  const server = createTrainerServer({
    capacity: 4,
    initialPolicyVersion: 0,
    ...(runId !== undefined ? { initialRunId: runId } : {}),
    onBatch: (event, id, metrics) => {
      if (event === "acked") acks.push({ id, ...(metrics ? { metrics } : {}) });
    },
    onWeights: (w) => {
      onWeights?.(w);
      announced.push({ ...w, at: server.stats() });
    },
  });
  servers.push(server);
  for (const b of batches) server.offer(b);
  const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
  return { server, url, announced, acks };
}

describe("arbor train-worker loop", () => {
  it("steps on a batch with signal, announces the checkpoint before acking, and acks a batch without signal unannounced", async () => {
    const { server, url, announced, acks } = await serve([batch("b1", [0, 1, 0.5]), batch("b2", [1, 1, 1])]);
    const outDir = join(dir, "out-1");
    const lines: string[] = [];
    const r = await runTrainWorker({ url, from: FROM, outDir, lr: 1e-3, batches: 2, pollMs: 5, log: (l) => lines.push(l) });
    expect(r.reason).toBe("batches");
    expect(r.batches.map((b) => [b.id, b.stepped, b.version])).toEqual([
      ["b1", true, 1],
      ["b2", false, 1],
    ]);
    expect(r.version).toBe(1);
    const ckpt = join(outDir, "policy-v1.gguf");
    expect(r.batches[0]!.checkpoint).toBe(ckpt);
    expect(readGguf(ckpt).metadata.get("arbor.policy_version")).toBe(1);
    expect(Number.isFinite(r.batches[0]!.loss)).toBe(true);
    // One announcement, made while b1 was still in flight (announce first, then ack).
    expect(announced.map((a) => [a.policyVersion, a.modelPath])).toEqual([[1, ckpt]]);
    expect(announced[0]!.at).toMatchObject({ inFlight: 1, acked: 0 });
    expect(server.stats()).toMatchObject({ acked: 2, inFlight: 0, queued: 0, policyVersion: 1, modelPath: ckpt });
    expect(existsSync(join(outDir, "policy-v2.gguf"))).toBe(false);
    expect(lines.some((l) => l.includes("batch b2: no sample carries an advantage; acked without a step"))).toBe(true);
    // The stepped batch's ack carries what the step measured; the unstepped one's carries nothing.
    expect(acks.map((a) => a.id)).toEqual(["b1", "b2"]);
    const m = acks[0]!.metrics!;
    expect(m.loss).toBe(r.batches[0]!.loss);
    expect(m.gradNorm).toBeGreaterThan(0);
    expect(m.entropy).toBeGreaterThan(0);
    expect(acks[1]!.metrics).toBeUndefined();
  }, 120_000);

  it("takes over the batch of a trainer that died holding it, and keeps its own through heartbeats and a slow announcement", async () => {
    const lines: string[] = [];
    const s = createTrainerServer({
      capacity: 2,
      leaseMs: 1500,
      log: (l) => lines.push(l),
      // The engines take longer than a lease to load the weights: the lease is held meanwhile.
      onWeights: () => new Promise((r) => setTimeout(r, 2000)),
    });
    servers.push(s);
    s.offer(batch("orphan", [0, 1, 0.5]));
    const url = await s.app.listen({ host: "127.0.0.1", port: 0 });
    // A trainer takes the batch and dies: no ack, no requeue, no heartbeat.
    expect((await new TrainerClient(url).nextBatch())?.id).toBe("orphan");
    const r = await runTrainWorker({ url, from: FROM, outDir: join(dir, "out-orphan"), batches: 1, pollMs: 20 });
    expect(r.batches.map((b) => [b.id, b.stepped, b.version])).toEqual([["orphan", true, 1]]);
    // Once back in the queue, the batch was trained once, by this worker; its own lease never ran out.
    expect(lines).toEqual(["trainer protocol: batch orphan: no heartbeat for 1.5 s (its trainer is gone): back in the queue for another trainer"]);
    expect(s.stats()).toMatchObject({ delivered: 2, requeued: 1, acked: 1, inFlight: 0, policyVersion: 1 });
  }, 120_000);

  it("continues the server's versions, polls while nothing is queued, and stops cleanly when the server goes away", async () => {
    const s = createTrainerServer({ capacity: 2, initialPolicyVersion: 4, onWeights: () => {} });
    servers.push(s);
    const url = await s.app.listen({ host: "127.0.0.1", port: 0 });
    const worker = runTrainWorker({
      url,
      from: FROM,
      outDir: join(dir, "out-2"),
      pollMs: 5,
      log: (l) => {
        // The run ends after its last ack: the server closes under the polling worker.
        if (l.includes("batch late:")) void s.app.close();
      },
    });
    // Offered while the worker is already polling.
    s.offer(batch("late", [0, 1, 1]));
    const r = await worker;
    expect(r.reason).toBe("server-gone");
    expect(r.batches.map((b) => [b.id, b.version])).toEqual([["late", 5]]);
    expect(existsSync(join(dir, "out-2", "policy-v5.gguf"))).toBe(true);
  }, 120_000);

  it("started again on a resumed run: from the run's checkpoint with Adam's state, its later checkpoints removed, the same step", async () => {
    const outDir = join(dir, "out-resume");
    const runDir = join(outDir, "run-a");
    // The uninterrupted worker: b1 → v1, b2 → v2 in the run's folder, Adam's state beside each checkpoint.
    const first = await serve([batch("b1", [0, 1, 0.5]), batch("b2", [1, 0, 0.25])], undefined, "run-a");
    const r1 = await runTrainWorker({ url: first.url, from: FROM, outDir, batches: 2, pollMs: 5 });
    expect(r1.batches.map((b) => b.version)).toEqual([1, 2]);
    for (const v of [1, 2]) expect(existsSync(join(runDir, `policy-v${v}.adam.safetensors`))).toBe(true);
    const uninterrupted = readGguf(join(runDir, "policy-v2.gguf")).tensors;
    // The run was killed before it recorded b2's step: resumed at v1, it offers b2 again. The worker gets no --from.
    const v1 = join(runDir, "policy-v1.gguf");
    const resumed = createTrainerServer({ capacity: 2, initialPolicyVersion: 1, initialModelPath: v1, initialRunId: "run-a", onWeights: () => {} });
    servers.push(resumed);
    resumed.offer(batch("b2", [1, 0, 0.25]));
    const url = await resumed.app.listen({ host: "127.0.0.1", port: 0 });
    const lines: string[] = [];
    const r2 = await runTrainWorker({ url, outDir, batches: 1, pollMs: 5, log: (l) => lines.push(l) });
    expect(lines[0]).toBe(`train-worker  removed checkpoints v2 from ${runDir}: the run serves version 1 (a killed run's unrecorded steps)`);
    expect(lines[1]).toBe(`train-worker  ${url}: training ${v1} from policy version 1 with its optimizer state (${join(runDir, "policy-v1.adam.safetensors")}), checkpoints in ${runDir}`);
    expect(r2.batches.map((b) => [b.id, b.version])).toEqual([["b2", 2]]);
    // Step for step what the uninterrupted worker trained (without the moments, Adam's step would differ).
    const again = readGguf(join(runDir, "policy-v2.gguf")).tensors;
    expect(again.map((t) => t.name)).toEqual(uninterrupted.map((t) => t.name));
    again.forEach((t, i) => expect(Array.from(t.data), t.name).toEqual(Array.from((uninterrupted[i] as typeof t).data)));
  }, 120_000);

  it("follows the server to the next run (a trainer-api's) in a folder of its own, keeping the earlier run's checkpoints, and needs a model path", async () => {
    const { server, url } = await serve([batch("b1", [0, 1, 0.5])], undefined, "run/a");
    const outDir = join(dir, "out-follow");
    const lines: string[] = [];
    const worker = runTrainWorker({
      url,
      from: FROM,
      outDir,
      batches: 2,
      pollMs: 5,
      log: (l) => {
        lines.push(l);
        // A new run on the same trainer protocol service: its engines serve the model again, at version 0.
        if (l.includes("batch b1:")) {
          server.setPolicy(0, FROM, "run-b");
          server.offer(batch("b2", [1, 0, 0.5]));
        }
      },
    });
    const r = await worker;
    expect(r.batches.map((b) => [b.id, b.version])).toEqual([
      ["b1", 1],
      ["b2", 1],
    ]);
    expect(lines).toContain(`train-worker  ${url}: the server serves run run-b: starting again from ${FROM}`);
    expect(lines.filter((l) => l.includes("removed checkpoints"))).toEqual([]);
    // Each run's v1 in its own folder (a run id's "/" made "_"): the first run's checkpoint and optimizer state stay.
    expect(r.batches.map((b) => b.checkpoint)).toEqual([join(outDir, "run_a", "policy-v1.gguf"), join(outDir, "run-b", "policy-v1.gguf")]);
    for (const run of ["run_a", "run-b"]) expect(existsSync(join(outDir, run, "policy-v1.adam.safetensors"))).toBe(true);
    expect(server.stats()).toMatchObject({ policyVersion: 1, modelPath: join(outDir, "run-b", "policy-v1.gguf"), runId: "run-b" });
    // A server that names no weights, and no --from: the batch goes back, the error says what to give.
    const bare = createTrainerServer({ capacity: 1, onWeights: () => {} });
    servers.push(bare);
    bare.offer(batch("b3", [0, 1, 1]));
    const bareUrl = await bare.app.listen({ host: "127.0.0.1", port: 0 });
    await expect(runTrainWorker({ url: bareUrl, outDir, pollMs: 5 })).rejects.toThrow(/reports no model path; give --from <gguf>/);
    expect(bare.stats()).toMatchObject({ queued: 1, requeued: 1 });
    await expect(runTrainWorker({ url: bareUrl, from: "models/none.gguf", outDir })).rejects.toThrow(/--from models\/none\.gguf: no such file/);
  }, 120_000);

  it("requeues the batch and fails when the announcement is refused", async () => {
    const { server, url } = await serve([batch("b1", [0, 1, 1])], () => {
      throw new Error("engine e0 refused the file");
    });
    await expect(runTrainWorker({ url, from: FROM, outDir: join(dir, "out-3"), pollMs: 5 })).rejects.toThrow(/POST \/v1\/weights: HTTP 502 .*engine e0 refused the file/);
    expect(server.stats()).toMatchObject({ queued: 1, inFlight: 0, acked: 0, requeued: 1, policyVersion: 0 });
  }, 120_000);

  it("waits at start for a server that is not listening yet (a worker started before its run)", async () => {
    const probe = createTrainerServer({ capacity: 1, onWeights: () => {} });
    const url = await probe.app.listen({ host: "127.0.0.1", port: 0 });
    await probe.app.close();
    const worker = runTrainWorker({ url, from: FROM, outDir: join(dir, "out-5"), batches: 1, waitMs: 60_000 });
    // Nothing listens for a while (the worker retries), then the run's server comes up on that port.
    await new Promise((r) => setTimeout(r, 1200));
    const server = createTrainerServer({ capacity: 4, initialPolicyVersion: 0, onWeights: () => {} });
    servers.push(server);
    server.offer(batch("late", [1, 0, 0, 0]));
    await server.app.listen({ host: "127.0.0.1", port: Number(new URL(url).port) });
    const r = await worker;
    expect(r.reason).toBe("batches");
    expect(r.batches.map((b) => b.id)).toEqual(["late"]);
  }, 120_000);

  it("fails when no server answers before any batch, and on bad options", async () => {
    const s = createTrainerServer({ capacity: 1, onWeights: () => {} });
    const url = await s.app.listen({ host: "127.0.0.1", port: 0 });
    await s.app.close();
    const lines: string[] = [];
    await expect(runTrainWorker({ url, from: FROM, outDir: join(dir, "out-4"), waitMs: 600, log: (l) => lines.push(l) })).rejects.toThrow(/trainer protocol: cannot reach http:\/\/127\.0\.0\.1:\d+\/v1\/stats: ECONNREFUSED \(retried for 0\.6 s, --wait-ms\)$/);
    // The wait is said once, as it starts.
    expect(lines).toEqual([`train-worker  ${url}: not reachable yet (trainer protocol: cannot reach ${url}/v1/stats: ECONNREFUSED); retrying for up to 0.6 s (--wait-ms)`]);
    await expect(runTrainWorker({ url, from: FROM, outDir: join(dir, "out-4"), waitMs: -1 })).rejects.toThrow(/--wait-ms must be an integer >= 0, got -1/);
    await expect(runTrainWorker({ url, from: FROM, outDir: join(dir, "out-4"), lr: 0 })).rejects.toThrow(/--lr must be > 0, got 0/);
    await expect(runTrainWorker({ url, from: FROM, outDir: join(dir, "out-4"), batches: 0 })).rejects.toThrow(/--batches must be an integer >= 1/);
    await expect(runTrainWorker({ url, from: FROM, outDir: join(dir, "out-4"), keepCheckpoints: 0 })).rejects.toThrow(/--keep-checkpoints must be an integer >= 1, got 0/);
  });
});
