// `arbor serve trainer-api` (a process, on the local NATS) when the orchestrator whose batch it holds is gone: a
// deployment trains one run at a time, so once a later orchestrator announces itself (`orchestrator-started`), the
// earlier one's batch is taken back from the trainers, no weights are accepted for it, and a redelivery of it is
// dropped; the later orchestrator's batch is served. (Before this, a killed run's batch was trained after the kill
// and its weights loaded on the engines under the next run.)
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { JetStreamEventBus } from "../broker/jetstream-event-bus.js";
import { JetStreamWorkQueue } from "../broker/jetstream-work-queue.js";
import { clusterBroker, clusterStreams, loadClusterConfig } from "../core/cluster-config.js";
import type { BatchWork, TrainerEvents } from "../loop/brokered-trainer.js";
import { deleteStreams, freePort, natsUnreachable, NATS_TEST_URL, spawnArbor, waitReady, type ArborProcess } from "../testing/arbor-services.js";
import { specTrajectories } from "../testing/test-batches.js";

const unreachable = await natsUnreachable();
const dir = mkdtempSync(join(tmpdir(), "arbor-trainer-api-"));
const name = `ta${process.pid}`;
let api: ArborProcess | undefined;

afterAll(async () => {
  api?.child.kill("SIGKILL");
  if (unreachable === undefined) await deleteStreams(`ARBOR_${name}_`);
});

/** A batch file of one group whose rewards differ (it has signal), and its work message from orchestrator `session`. */
function work(id: string, session: string, runId: string): BatchWork {
  const call = { output: [50, 60], tool: [40], logprobs: [-2, -2] };
  const { trajectories, groups } = specTrajectories({ prompts: [[30, 31]], groups: [[0, 1].map((p) => ({ forkFrom: 0, forkDepth: p, calls: [call], reward: p }))], estimator: "grpo", mode: "merged" });
  const path = join(dir, `${id}.json`);
  writeFileSync(path, JSON.stringify(buildTrainingBatch({ id, trajectories, groups, estimator: "grpo" }).batch));
  return { v: 1, batchId: id, path, policyVersion: 0, modelPath: "models/calc-sft.gguf", session, runId };
}

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  for (let waited = 0; !(await ok()); waited += 100) {
    if (waited > 30_000) throw new Error(`${what}: not within 30 s; trainer-api log:\n${api?.log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(unreachable !== undefined)("arbor serve trainer-api with a superseded orchestrator", () => {
  it("takes the earlier orchestrator's batch back, refuses weights for it, drops its redelivery and serves the later one's", async () => {
    const port = await freePort();
    const enginePort = await freePort();
    const cluster = join(dir, "cluster.yaml");
    writeFileSync(
      cluster,
      [
        `name: ${name}`,
        "model: {path: models/calc-sft.gguf}",
        "store: {kind: postgres, url: \"postgres://postgres@127.0.0.1:5432/test\"}",
        // Never reached: no weights are loaded in this test.
        `engines: [{name: e0, host: 127.0.0.1, port: ${enginePort}, sequences: 1, contextSize: 1024}]`,
        `backends: [{name: e0, type: builtin, url: "http://127.0.0.1:${enginePort}/v1"}]`,
        "gateway: {host: 127.0.0.1, port: 0}",
        `broker: {kind: nats, url: "${NATS_TEST_URL}"}`,
        `trainerApi: {host: 127.0.0.1, port: ${port}}`,
      ].join("\n"),
    );
    const url = `http://127.0.0.1:${port}`;
    api = spawnArbor(["serve", "trainer-api", "--cluster", cluster]);
    await waitReady(url, api);
    const cfg = loadClusterConfig(cluster);
    const broker = clusterBroker(cfg, "test");
    const streams = clusterStreams(cfg);
    const bus = await JetStreamEventBus.connect<TrainerEvents>(broker.url, { stream: streams.events, duplicateWindowMs: broker.duplicateWindowMs });
    const queue = await JetStreamWorkQueue.connect<BatchWork>(broker.url, { stream: streams.batches, ackWaitMs: broker.ackWaitMs, maxDeliver: broker.maxDeliver, duplicateWindowMs: broker.duplicateWindowMs });
    const stats = async (): Promise<{ queued: number; inFlight: number; runId: string | null }> => (await (await fetch(`${url}/v1/stats`)).json()) as { queued: number; inFlight: number; runId: string | null };
    try {
      // The first orchestrator offers a batch, and a trainer takes it.
      await bus.publish("orchestrator-started", { session: "A", runId: "run-a" }, "started:A");
      await queue.publish("a-it1", work("a-it1", "A", "run-a"));
      await until("batch a-it1 offered", async () => (await stats()).queued === 1);
      // The trainers learn the run with its batch (a train-worker keeps each run's checkpoints apart by it).
      expect((await stats()).runId).toBe("run-a");
      expect((await fetch(`${url}/v1/batches/next`)).headers.get("x-arbor-batch-id")).toBe("a-it1");
      // It is killed; the next orchestrator starts: the batch is taken back from the trainer.
      await bus.publish("orchestrator-started", { session: "B", runId: "run-b" }, "started:B");
      await until("batch a-it1 withdrawn", async () => (await stats()).inFlight === 0);
      expect(api.log()).toContain("trainer-api: batch a-it1 withdrawn: its orchestrator was superseded (run run-b started)");
      const weights = await fetch(`${url}/v1/weights`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ policy_version: 1, model_path: "/x/policy-v1.gguf" }) });
      expect(weights.status).toBe(409);
      expect(((await weights.json()) as { error: string }).error).toMatch(/no batch is out with a trainer/);
      expect((await fetch(`${url}/v1/batches/a-it1/ack`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(404);
      // A batch of the earlier orchestrator arriving now is dropped; the later one's is served.
      await queue.publish("a-it2", work("a-it2", "A", "run-a"));
      await until("batch a-it2 dropped", async () => api?.log().includes("trainer-api: batch a-it2 dropped: its orchestrator was superseded") === true);
      await queue.publish("b-it1", work("b-it1", "B", "run-b"));
      await until("batch b-it1 offered", async () => (await stats()).queued === 1);
      expect((await stats()).runId).toBe("run-b");
      expect((await fetch(`${url}/v1/batches/next`)).headers.get("x-arbor-batch-id")).toBe("b-it1");
    } finally {
      await queue.close();
      await bus.close();
    }
  }, 120_000);
});
