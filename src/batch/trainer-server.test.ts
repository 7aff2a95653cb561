// The external-trainer path end to end over real HTTP: calls recorded in SQLite → merged samples → GRPO →
// Arrow batch served by the trainer protocol → pulled by TrainerClient, which reconstructs every sample exactly.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { CapacityError } from "../core/errors.js";
import type { Call } from "../core/types.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import type { ScoredSample } from "./batch-sample.js";
import { createGrpo } from "./estimators/grpo.js";
import { createGspo } from "./estimators/gspo.js";
import { sampleMeta } from "./export-arrow.js";
import { readTreeSafetensors } from "./export-safetensors.js";
import { fixtureSet } from "../testing/estimator-fixtures.js";
import { buildTreeBatch } from "./tree/tree-batch.js";
import { TrainerClient } from "./trainer-client.js";
import { createTrainerServer, type BatchEvent, type TrainerServer, type WeightsAnnouncement } from "./trainer-server.js";
import { buildSampleSet } from "./trajectory-samples.js";

describe("trainer protocol over HTTP", () => {
  let dir: string;
  let server: TrainerServer;
  let client: TrainerClient;
  let address: string;
  const announced: WeightsAnnouncement[] = [];
  const events: [BatchEvent, string][] = [];
  let scored: ScoredSample[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-trainer-proto-"));
    const store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
    await store.createRun(fixtureRun());
    const g = fixtureGroup("g1", "run-1", 3);
    await store.createGroup(g);
    for (const [i, id] of g.programIds.entries()) {
      await store.createProgram(fixtureProgram(g, i));
      const first = fixtureCall(id, 0, [-1e-12, -23.5, -(i + 1) / 3]);
      await store.recordCall(first);
      // The second call extends the first (prompt ‖ output ‖ tool output 7, 7): merged into one sample.
      const second: Call = { ...fixtureCall(id, 1, [-0.125 * (i + 1)]), promptTokenIds: [...first.promptTokenIds, ...first.outputTokenIds, 7, 7], policyVersion: 4 };
      await store.recordCall(second);
      await store.endProgram(id, { kind: "completed" }, 5000);
      await store.setReward(id, { total: i === 1 ? 1 : 0, components: { outcome: i === 1 ? 1 : 0 } });
    }
    const set = buildSampleSet(await store.listTrajectories("run-1"), await store.listGroups("run-1"), "merged");
    await store.close();
    const batch = createGrpo().score(set);
    scored = batch.samples;
    server = createTrainerServer({
      capacity: 2,
      onWeights: (w) => {
        if (w.modelPath.endsWith("broken.gguf")) throw new Error("engine refused the file");
        announced.push(w);
      },
      onBatch: (event, id) => events.push([event, id]),
    });
    server.offer({ id: "b1", samples: batch.samples, loss: batch.loss });
    address = await server.app.listen({ host: "127.0.0.1", port: 0 });
    client = new TrainerClient(address);
  });
  afterAll(async () => {
    await server.app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves the batch; the client reads the Arrow file and reconstructs every sample exactly", async () => {
    // prompt 3 + output 3 + tool output 2 + output 1: both calls in one sample per program.
    expect(scored.map((s) => s.tokenIds.length)).toEqual([9, 9, 9]);
    expect(scored[0]!.lossMask.filter((m) => m === 1)).toHaveLength(4);
    const got = await client.nextBatch();
    expect(got?.id).toBe("b1");
    expect(got?.samples).toEqual(scored);
    expect(got?.loss).toEqual(createGrpo().loss);
    expect(got?.stats.treeTokens).toBeLessThan(got?.stats.flatTokens ?? 0);
    expect(await client.nextBatch()).toBeNull(); // b1 is in flight, nothing else queued
    expect(await client.stats()).toMatchObject({ queued: 0, inFlight: 1, delivered: 1, acked: 0 });
  });

  it("requeues and acknowledges; unknown ids are 404", async () => {
    await client.requeue("b1");
    expect((await client.nextBatch())?.id).toBe("b1");
    await client.ack("b1");
    await expect(client.ack("b1")).rejects.toThrow(/ack b1: HTTP 404 \(batch queue: batch 'b1' is not in flight\)/);
    const s = await client.stats();
    expect(s).toMatchObject({ queued: 0, inFlight: 0, delivered: 2, acked: 1, requeued: 1 });
    // Every take, requeue and ack told once, in order; the refused second ack is not an event.
    expect(events).toEqual([
      ["taken", "b1"],
      ["requeued", "b1"],
      ["taken", "b1"],
      ["acked", "b1"],
    ]);
    expect(s.ackedFlatTokens).toBe(27);
  });

  it("an ack may carry the step's metrics (to onBatch); a malformed body is a 400 that acks nothing", async () => {
    const seen: [string, string, unknown][] = [];
    const srv = createTrainerServer({ capacity: 2, onWeights: () => undefined, onBatch: (event, id, metrics) => void seen.push([event, id, metrics]) });
    srv.offer({ id: "m1", samples: scored, loss: createGrpo().loss });
    const url = await srv.app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const c = new TrainerClient(url);
      await c.nextBatch();
      const post = (body: string) => fetch(`${url}/v1/batches/m1/ack`, { method: "POST", headers: { "content-type": "application/json" }, body });
      const bad = await post(JSON.stringify({ metrics: { entropy: "high" } }));
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: string }).error).toMatch(/^ack body: metrics\.entropy: /);
      expect((await post(JSON.stringify({ metrics: { loss: 1, lr: 2 } }))).status).toBe(400);
      expect((await c.stats()).inFlight).toBe(1);
      // Non-finite values travel as null (JSON has no NaN) and are left out.
      await c.ack("m1", { loss: 0.5, gradNorm: NaN, entropy: 1.75 });
      expect(seen.filter(([e]) => e === "acked")).toEqual([["acked", "m1", { loss: 0.5, entropy: 1.75 }]]);
    } finally {
      await srv.app.close();
    }
  });

  it("a batch whose trainer is gone (no heartbeat for its lease) goes to another trainer; after its weights were announced, it is acked", async () => {
    const clock = new VirtualClock();
    const seen: [string, string][] = [];
    const logged: string[] = [];
    const srv = createTrainerServer({ capacity: 2, leaseMs: 1000, clock, log: (l) => logged.push(l), onWeights: () => undefined, onBatch: (event, id) => void seen.push([event, id]) });
    const loss = createGrpo().loss;
    srv.offer({ id: "l1", samples: scored, loss });
    const url = await srv.app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const dead = new TrainerClient(url);
      expect((await dead.stats()).leaseMs).toBe(1000);
      expect((await dead.nextBatch())?.id).toBe("l1");
      // Heartbeats keep it: 2 × 700 ms is past one lease.
      clock.advance(700);
      await dead.heartbeat("l1");
      clock.advance(700);
      expect((await dead.stats()).inFlight).toBe(1);
      // Then the trainer dies: one lease later the batch is back in the queue, and another trainer gets it.
      clock.advance(300);
      expect(await dead.stats()).toMatchObject({ inFlight: 0, queued: 1, requeued: 1 });
      expect(logged).toEqual(["trainer protocol: batch l1: no heartbeat for 1 s (its trainer is gone): back in the queue for another trainer"]);
      await expect(dead.heartbeat("l1")).rejects.toThrow(/HTTP 404 .*batch 'l1' is not out with a trainer/);
      // A late announcement of weights trained on it is refused: the batch is another trainer's to train now.
      await expect(dead.announceWeights(1, "/w/late.gguf", "l1")).rejects.toThrow(/HTTP 409 .*batch_id: batch 'l1' is not out with a trainer/);
      const next = new TrainerClient(url);
      expect((await next.nextBatch())?.id).toBe("l1");
      // This one announces the weights it trained on the batch, then dies before its ack: acked when the lease runs out
      // (training the batch again would count it twice: the engines serve what it learnt).
      await next.announceWeights(1, "/w/v1.gguf", "l1");
      clock.advance(1000);
      expect(await next.stats()).toMatchObject({ inFlight: 0, queued: 0, acked: 1, policyVersion: 1 });
      expect(logged[1]).toBe("trainer protocol: batch l1: no ack nor heartbeat for 1 s after the weights trained on it were announced (its trainer is gone): acked without metrics");
      expect(seen).toEqual([
        ["taken", "l1"],
        ["expired", "l1"],
        ["taken", "l1"],
        ["acked", "l1"],
      ]);
      // An announcement that names no batch goes with the one batch out; an ack ends the lease (no expiry after it).
      srv.offer({ id: "l2", samples: scored, loss });
      await next.nextBatch();
      await next.announceWeights(2, "/w/v2.gguf");
      await next.ack("l2");
      clock.advance(5000);
      expect(await next.stats()).toMatchObject({ acked: 2, requeued: 1 });
      expect(logged).toHaveLength(2);
    } finally {
      await srv.app.close();
    }
  });

  it("a batch whose weights are being or were announced is not requeued (it would be trained twice): refused, then acked", async () => {
    const logged: string[] = [];
    const seen: [string, string][] = [];
    // The engines' load answers when the test says (a real one can take minutes: a client may time out first).
    let loaded!: () => void;
    let started!: () => void;
    const loading = new Promise<void>((r) => (loaded = r));
    const loadStarted = new Promise<void>((r) => (started = r));
    const srv = createTrainerServer({ capacity: 2, log: (l) => logged.push(l), onWeights: () => (started(), loading), onBatch: (event, id) => void seen.push([event, id]) });
    srv.offer({ id: "r1", samples: scored, loss: createGrpo().loss });
    const url = await srv.app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const trainer = new TrainerClient(url);
      await trainer.nextBatch();
      const announcing = trainer.announceWeights(1, "/w/v1.gguf", "r1");
      await loadStarted;
      // The trainer's client gave up on the announcement and gives the batch back: refused while it loads.
      await expect(trainer.requeue("r1")).rejects.toThrow(/HTTP 409 .*batch 'r1': the weights trained on it are being announced, so it cannot go back to the queue/);
      loaded();
      await announcing;
      // Announced: a requeue acks it without metrics instead.
      await expect(trainer.requeue("r1")).rejects.toThrow(/HTTP 409 .*batch 'r1': the weights trained on it were announced, so it was acked without metrics, not requeued/);
      expect(await trainer.stats()).toMatchObject({ inFlight: 0, queued: 0, acked: 1, requeued: 0, policyVersion: 1 });
      expect(await trainer.nextBatch()).toBeNull();
      expect(seen).toEqual([
        ["taken", "r1"],
        ["acked", "r1"],
      ]);
      expect(logged).toEqual(["trainer protocol: batch r1: requeued after the weights trained on it were announced: acked without metrics"]);
    } finally {
      await srv.app.close();
    }
  });

  it("bounds the queue: offering past capacity is a CapacityError", () => {
    const b = { samples: scored, loss: createGrpo().loss };
    server.offer({ id: "b2", ...b });
    server.offer({ id: "b3", ...b });
    expect(() => server.offer({ id: "b4", ...b })).toThrow(CapacityError);
    expect(() => server.offer({ id: "b2", ...b })).toThrow(/already queued/);
  });

  it("announces weights through the hook; stale, malformed and failing announcements are refused", async () => {
    await client.announceWeights(5, "/models/v5.gguf");
    expect(announced).toEqual([{ policyVersion: 5, modelPath: "/models/v5.gguf" }]);
    expect(await client.stats()).toMatchObject({ policyVersion: 5, modelPath: "/models/v5.gguf" });
    await expect(client.announceWeights(5, "/models/again.gguf")).rejects.toThrow(/HTTP 409 .*must be greater than the current policy version 5/);
    await expect(client.announceWeights(6, "/models/broken.gguf")).rejects.toThrow(/HTTP 502 .*engine refused the file/);
    const res = await fetch(`${address}/v1/weights`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ policy_version: "7" }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/policy_version: must be a number/);
    expect((await client.stats()).policyVersion).toBe(5);
  });
});

describe("GET /v1/batches/next?format=", () => {
  // GSPO over two programs sharing a prompt, one with two chunks: sequence ratio units, a masked tool token.
  const set = fixtureSet([
    { id: "a", group: "g", reward: 1, chunks: [2, 2] },
    { id: "b", group: "g", reward: 0, chunks: [3] },
  ]);
  const scored = createGspo().score(set);
  let server: TrainerServer;
  let address: string;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-trainer-st-"));
    server = createTrainerServer({ capacity: 2, onWeights: () => undefined });
    server.offer({ id: "t1", samples: scored.samples, loss: scored.loss, programs: set.programs });
    address = await server.app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await server.app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses an unknown format with 400 naming `format`, without taking a batch", async () => {
    const res = await fetch(`${address}/v1/batches/next?format=parquet`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe("format: 'parquet' is not a batch format (known: arrow, safetensors)");
    expect(server.stats()).toMatchObject({ queued: 1, inFlight: 0, delivered: 0 });
  });

  it("serves the batch's whole prefix tree as safetensors with the samples' metadata; acks drop it", async () => {
    const res = await fetch(`${address}/v1/batches/next?format=safetensors`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("x-arbor-batch-id")).toBe("t1");
    expect(res.headers.get("x-arbor-schema")).toBe("arbor.tree.v2");
    const bytes = new Uint8Array(await res.arrayBuffer());
    const path = join(dir, "t1.safetensors");
    writeFileSync(path, bytes);
    const back = readTreeSafetensors(path);
    const want = buildTreeBatch(scored.samples, scored.loss);
    expect(back.batchId).toBe("t1");
    expect(back.tree).toEqual(want.tree);
    expect(back.tree.samplePaths).toHaveLength(2);
    expect(back.termUnit).toEqual(want.termUnit);
    expect(back.termToken).toEqual(want.termToken);
    expect(back.loss).toEqual(scored.loss);
    expect(back.stats).toEqual(want.stats);
    // The metadata (read by hand: readTreeSafetensors keeps only the tree) names the samples and programs.
    const n = Number(Buffer.from(bytes).readBigUInt64LE(0));
    const meta = (JSON.parse(Buffer.from(bytes.subarray(8, 8 + n)).toString("utf8")) as { __metadata__: Record<string, string> }).__metadata__;
    expect(JSON.parse(meta["arbor.samples"] as string)).toEqual(sampleMeta(scored.samples));
    expect(JSON.parse(meta["arbor.programs"] as string)).toEqual(set.programs);
    // The Arrow form of the same batch after a requeue; format=arrow is the default spelled out.
    await fetch(`${address}/v1/batches/t1/requeue`, { method: "POST" });
    const arrow = await fetch(`${address}/v1/batches/next?format=arrow`);
    expect(arrow.headers.get("content-type")).toBe("application/vnd.apache.arrow.file");
    expect(arrow.headers.get("x-arbor-schema")).toBe("arbor.batch.v1");
    await arrow.arrayBuffer();
    expect((await fetch(`${address}/v1/batches/t1/ack`, { method: "POST" })).status).toBe(200);
    expect((await fetch(`${address}/v1/batches/next?format=safetensors`)).status).toBe(204);
    // Acked, the id may be offered again and is served afresh.
    server.offer({ id: "t1", samples: scored.samples.slice(1), loss: scored.loss });
    const again = await fetch(`${address}/v1/batches/next?format=safetensors`);
    writeFileSync(path, new Uint8Array(await again.arrayBuffer()));
    expect(readTreeSafetensors(path).tree.samplePaths).toHaveLength(1);
  });
});
