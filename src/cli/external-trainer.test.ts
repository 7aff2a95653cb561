// `arbor run` with train.trainer: external end to end on the real stack (the shipped SFT policy on two
// llama.cpp engines behind the gateway, bwrap sandboxes, SQLite store), trained by `arbor train-worker`'s
// loop in the same process over HTTP: each iteration's batch is taken, stepped on, announced (both engines
// load it) and acked, and the next iteration runs on the announced version; the finished run resumed one iteration
// further with a worker started again without --from (it goes on from v2 with its optimizer state). Then the wait's
// limits (on a virtual clock), a run nobody trains, and the config's errors.
import { chmodSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { BackendReply } from "../backends/backend.js";
import { TrainerClient } from "../batch/trainer-client.js";
import { VirtualClock } from "../core/clock.js";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { specTrajectories } from "../testing/test-batches.js";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { startExternalTrainer, type ExternalTrainer } from "../loop/external-trainer.js";
import { runIteration, type RunSummary } from "./run.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { runTrainWorker, type TrainWorkerResult } from "./train-worker.js";
import { iterationTrajectories } from "../testing/iteration-trajectories.js";
import { parseOverride } from "../core/config-overrides.js";
import { readResumeState } from "../loop/resume-state.js";
import { loadResumedRun } from "./run-resume.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-external-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);
const FROM = "models/calc-sft.gguf";

/** A small real RL config; `train` decides who trains. */
function config(name: string, o: { tasks: number; iterations: number; engines: number; train: Record<string, unknown> }) {
  return parseRunConfig(
    smallRlConfig(dir, name, {
      model: { path: FROM },
      engines: Array.from({ length: o.engines }, (_, i) => ({ name: `e${i}`, sequences: 4, contextSize: 1024 })),
      env: { name: "calc", tasks: o.tasks, seed: 7 },
      iterations: o.iterations,
      train: { estimator: "grpo", ...o.train },
    }),
  );
}

describe("arbor run with train.trainer: external and arbor train-worker (end to end)", () => {
  const lines: string[] = [];
  const replies: { backend: string; version: number }[] = [];
  const workerOut = join(dir, "worker");
  /** The worker writes each run's checkpoints in a folder of their own (the run GET /v1/stats names). */
  const runOut = join(workerOut, "ext-e2e");
  let summary: RunSummary;
  let worker: TrainWorkerResult;

  beforeAll(async () => {
    let started: Promise<TrainWorkerResult> | undefined;
    let workerError: unknown;
    summary = await runIteration(config("ext-e2e", { tasks: 2, iterations: 2, engines: 2, train: { trainer: "external", lr: 3e-3, external: { waitMs: 240_000 } } }), {
      progress: false,
      runId: "ext-e2e",
      log: (line) => {
        lines.push(line);
        // The trainer starts where an operator would: from the URL the run prints.
        const url = /^trainer {2}(http:\/\/\S+) \(external: waiting for a trainer\)$/.exec(line)?.[1];
        if (url !== undefined) {
          started = runTrainWorker({ url, from: FROM, outDir: workerOut, lr: 3e-3, pollMs: 20 });
          started.catch((e: unknown) => (workerError = e));
        }
      },
      onBackendReply: (backend: string, reply: BackendReply) => {
        if (reply.status === 200) replies.push({ backend, version: reply.json.policy_version as number });
      },
    });
    expect(started, "the run printed no trainer URL").toBeDefined();
    // The run closed its server after the last ack: the worker sees it gone and stops.
    worker = await (started as Promise<TrainWorkerResult>);
    expect(workerError).toBeUndefined();
  }, 400_000);

  it("trains both iterations through the worker and ends with every engine on version 2", async () => {
    expect(summary.iterations.map((r) => r.policyVersion)).toEqual([0, 1]);
    expect(summary.iterations.map((r) => r.update?.stepped)).toEqual([true, true]);
    expect(summary.iterations.map((r) => r.update?.version)).toEqual([1, 2]);
    expect(summary.policyVersion).toBe(2);
    expect(summary.engineVersions).toEqual([2, 2]);
    expect(worker.reason).toBe("server-gone");
    expect(worker.batches.map((b) => [b.id, b.stepped, b.version])).toEqual([
      ["ext-e2e-it1", true, 1],
      ["ext-e2e-it2", true, 2],
    ]);
    for (const v of [1, 2]) expect(existsSync(join(runOut, `policy-v${v}.gguf`))).toBe(true);
    expect(summary.iterations.map((r) => r.update?.checkpoint)).toEqual([join(runOut, "policy-v1.gguf"), join(runOut, "policy-v2.gguf")]);
    // The run's own checkpoint directory stays empty: the worker wrote them.
    expect(existsSync(join(dir, "ext-e2e", "checkpoints"))).toBe(false);
  });

  it("rolls each iteration out on the version acked before it, on both engines", async () => {
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      for (const r of summary.iterations) {
        const calls = (await iterationTrajectories(store, r.runId, r.iteration)).flatMap((t) => t.calls);
        expect(calls.length).toBeGreaterThanOrEqual(8);
        expect(new Set(calls.map((c) => c.policyVersion))).toEqual(new Set([r.policyVersion]));
      }
    } finally {
      await store.close();
    }
    for (const backend of ["e0", "e1"]) expect(new Set(replies.filter((r) => r.backend === backend).map((r) => r.version))).toEqual(new Set([0, 1]));
  });

  it("resumed one iteration further, a worker started again without --from goes on from v2 with its optimizer state", async () => {
    const out = join(dir, "ext-e2e");
    expect(readResumeState(out)).toMatchObject({ completedIterations: 2, policyVersion: 2, checkpoint: join(runOut, "policy-v2.gguf") });
    // An external trainer keeps its optimizer state itself: the run records none.
    expect(readResumeState(out).optimizer).toBeUndefined();
    const { cfg, state } = loadResumedRun(out, undefined, [parseOverride("iterations=3")]);
    const logged: string[] = [];
    let started: Promise<TrainWorkerResult> | undefined;
    const resumed = await runIteration(cfg, {
      progress: false,
      resume: state,
      log: (line) => {
        logged.push(line);
        const url = /^trainer {2}(http:\/\/\S+) \(external: waiting for a trainer at policy v2\)$/.exec(line)?.[1];
        if (url !== undefined) started = runTrainWorker({ url, outDir: workerOut, lr: 3e-3, pollMs: 20, log: (l) => logged.push(l) });
      },
    });
    expect(started, logged.join("\n")).toBeDefined();
    const again = await (started as Promise<TrainWorkerResult>);
    expect(logged).toContain(`resume   ext-e2e: 2 of 3 iterations done, policy v2`);
    expect(logged.some((l) => l.includes(`training ${join(runOut, "policy-v2.gguf")} from policy version 2 with its optimizer state`))).toBe(true);
    expect(again.batches.map((b) => [b.id, b.version])).toEqual([["ext-e2e-it3-r1", 3]]);
    expect(resumed.iterations.map((r) => [r.iteration, r.policyVersion, r.update?.version])).toEqual([[3, 2, 3]]);
    expect(resumed.engineVersions).toEqual([3, 3]);
    expect(readResumeState(out)).toMatchObject({ completedIterations: 3, policyVersion: 3, checkpoint: join(runOut, "policy-v3.gguf"), resumes: 1 });
  }, 400_000);

  it("prints the trainer URL once and a line per iteration with the version after the ack", async () => {
    expect(lines.filter((l) => l.startsWith("trainer "))).toHaveLength(1);
    const its = lines.filter((l) => l.startsWith("iteration "));
    expect(its).toHaveLength(2);
    expect(its[0]).toMatch(/^iteration 1\/2 {2}reward -?\d\.\d{3} \(outcome -?\d\.\d{3}, process -?\d\.\d{3}\) {2}external trainer {2}tokens \d+ tree \/ \d+ flat \(\d+\/\d+ samples\) .* policy v0 → v1$/);
    expect(its[1]).toMatch(/policy v1 → v2$/);
  });
});

describe("waiting for the external trainer", () => {
  // Two groups with different rewards within each: the batch has signal.
  const call = (output: number[]) => ({ output, tool: [40], logprobs: output.map(() => -2) });
  const program = (p: number, reward: number) => ({ forkFrom: 0, forkDepth: p, calls: [call([50 + p, 60]), call([70])], reward });
  // The batch the loop builds of such a rollout, named `id`.
  const rollout = (id: string) => buildTrainingBatch({ id, ...specTrajectories({ prompts: [[30, 31]], groups: [[program(0, 0), program(1, 1)]], estimator: "grpo", mode: "merged" }), estimator: "grpo", mode: "merged" });

  async function start(clock: VirtualClock, signal?: AbortSignal, leaseMs = 300_000): Promise<ExternalTrainer> {
    return startExternalTrainer({
      config: { host: "127.0.0.1", port: 0, waitMs: 1000, leaseMs },
      weights: { load: async () => {} }, // no engines: only the protocol is under test
      modelPath: "models/x.gguf",
      runId: "ext-run",
      clock,
      ...(signal ? { signal } : {}),
    });
  }

  it("resolves on the ack with the version announced before it; refuses announcements while no batch is out", async () => {
    const ext = await start(new VirtualClock());
    try {
      const client = new TrainerClient(ext.url);
      // GET /v1/stats names the weights the engines serve from the start (model.path), then the announced ones, and the run.
      expect(await client.stats()).toMatchObject({ policyVersion: 0, modelPath: "models/x.gguf", runId: "ext-run" });
      await expect(client.announceWeights(1, "/w/v1.gguf")).rejects.toThrow(/HTTP 409 .*not waiting for a batch; announce the weights trained on a batch before acking/);
      const trained = ext.step(rollout("b1"));
      const b = await client.nextBatch();
      expect(b?.id).toBe("b1");
      expect(b?.samples).toHaveLength(2);
      await client.announceWeights(1, "/w/v1.gguf");
      expect(ext.version).toBe(1);
      expect(await client.stats()).toMatchObject({ policyVersion: 1, modelPath: "/w/v1.gguf" });
      // The step's metrics come with the ack (the PyTorch worker sends them) and become the update's.
      await client.ack("b1", { loss: -0.25, gradNorm: 1.5, entropy: 2.125 });
      const u = await trained;
      expect(u).toMatchObject({ stepped: true, version: 1, checkpoint: "/w/v1.gguf", samples: 2, trainedSamples: 2, loss: -0.25, gradNorm: 1.5, entropy: 2.125 });
      expect(u.treeTokens).toBeLessThan(u.flatTokens);
      // Acked without new weights (and without metrics): no step, same version, nothing measured.
      const again = ext.step(rollout("b2"));
      await client.ack((await client.nextBatch())!.id);
      const none = await again;
      expect(none).toMatchObject({ stepped: false, version: 1 });
      expect([none.loss, none.gradNorm, none.entropy]).toEqual([NaN, NaN, NaN]);
    } finally {
      await ext.close();
    }
  });

  it("fails after waitMs naming the URL, the batch and what is missing; a requeue restarts the wait", async () => {
    const clock = new VirtualClock();
    const ext = await start(clock);
    try {
      const client = new TrainerClient(ext.url);
      const none = ext.step(rollout("never-taken"));
      clock.advance(1000);
      await expect(none).rejects.toThrow(
        new RegExp(`external trainer at ${ext.url}: batch 'never-taken' was not acknowledged within 1000 ms \\(train.external.waitMs\\): no trainer took it .*arbor train-worker --url ${ext.url} --from models/x.gguf`),
      );
      // The failed batch is still queued; a late ack is harmless (and frees its slot).
      await client.ack((await client.nextBatch())!.id);

      const held = ext.step(rollout("held"));
      await client.nextBatch();
      clock.advance(600);
      await client.requeue("held");
      clock.advance(600); // 1200 ms since the offer, 600 since the requeue: still waiting
      await client.nextBatch();
      await client.announceWeights(3, "/w/v3.gguf");
      clock.advance(400);
      await expect(held).rejects.toThrow(/batch 'held' was not acknowledged within 1000 ms .*: a trainer took it and announced version 3 but did not ack it \(POST \/v1\/batches\/held\/ack\)/);
      await client.ack("held");

      const back = ext.step(rollout("given-back"));
      await client.nextBatch();
      await client.requeue("given-back");
      clock.advance(1000);
      await expect(back).rejects.toThrow(/batch 'given-back' .*: a trainer gave it back \(requeue\) and none took it again/);
    } finally {
      await ext.close();
    }
  });

  it("a trainer gone with the batch: its lease gives the batch to the next trainer, or acks it after its announcement", async () => {
    const clock = new VirtualClock();
    const ext = await start(clock, undefined, 400);
    try {
      const client = new TrainerClient(ext.url);
      // Taken, then nothing: at 400 ms the batch is back and the wait starts again; nobody takes it by 1400 ms.
      const lost = ext.step(rollout("lost"));
      await client.nextBatch();
      clock.advance(400);
      expect(await client.stats()).toMatchObject({ queued: 1, inFlight: 0, requeued: 1 });
      // The gone trainer's late announcement (naming no batch) finds none out: refused, nothing loaded.
      await expect(client.announceWeights(1, "/w/late.gguf")).rejects.toThrow(/HTTP 409 .*no batch is out with a trainer \(batch 'lost' is queued: given back, or its lease ran out\)/);
      expect(ext.version).toBe(0);
      clock.advance(999);
      expect(await client.stats()).toMatchObject({ queued: 1 });
      clock.advance(1);
      await expect(lost).rejects.toThrow(/batch 'lost' was not acknowledged within 1000 ms .*: a trainer took it and went away \(no heartbeat for train\.external\.leaseMs 400 ms\) and none took it again/);
      await client.ack((await client.nextBatch())!.id);
      // Given back once (a failed step's requeue), then taken by a trainer that went away: the last of it is said.
      const twice = ext.step(rollout("twice"));
      await client.nextBatch();
      await client.requeue("twice");
      await client.nextBatch();
      clock.advance(400);
      clock.advance(1000);
      await expect(twice).rejects.toThrow(/batch 'twice' was not acknowledged within 1000 ms .*: a trainer took it and went away \(no heartbeat/);
      await client.ack((await client.nextBatch())!.id);
      // Announced, then gone before the ack: the lease acks it, and the step ends with the announced version.
      const trained = ext.step(rollout("trained"));
      await client.nextBatch();
      await client.announceWeights(1, "/w/v1.gguf", "trained");
      clock.advance(400);
      const u = await trained;
      expect(ext.version).toBe(1);
      expect(u.stepped).toBe(true);
      expect(Number.isNaN(u.loss)).toBe(true);
    } finally {
      await ext.close();
    }
  });

  it("stops waiting when the run is aborted", async () => {
    const abort = new AbortController();
    const ext = await start(new VirtualClock(), abort.signal);
    try {
      const waiting = ext.step(rollout("b1"));
      abort.abort(new Error("received SIGINT"));
      await expect(waiting).rejects.toThrow(/run aborted \(received SIGINT\) while waiting for the external trainer at .* to ack batch 'b1'/);
    } finally {
      await ext.close();
    }
  });

  it("fails a run that no trainer serves, naming the URL and the batch, and stops its server", async () => {
    const lines: string[] = [];
    const run = runIteration(config("ext-timeout", { tasks: 1, iterations: 1, engines: 1, train: { trainer: "external", external: { waitMs: 300 } } }), {
      progress: false,
      runId: "ext-timeout",
      log: (l) => lines.push(l),
    });
    await expect(run).rejects.toThrow(/external trainer at http:\/\/127\.0\.0\.1:\d+: batch 'ext-timeout-it1' was not acknowledged within 300 ms \(train\.external\.waitMs\): no trainer took it/);
    const url = /^trainer {2}(\S+)/.exec(lines.find((l) => l.startsWith("trainer ")) ?? "")?.[1];
    expect(url).toBeDefined();
    await expect(new TrainerClient(url!).stats()).rejects.toThrow(/cannot reach/);
  }, 240_000);
});

describe("train.trainer / train.external config", () => {
  const engines = [{ name: "e0" }];
  it("defaults to the reference trainer and fills the external defaults", async () => {
    expect(parseRunConfig({ engines, train: {} }).train?.trainer).toBe("reference");
    expect(parseRunConfig({ engines, train: { trainer: "external" } }).train?.external).toEqual({ host: "127.0.0.1", port: 0, waitMs: 600_000, leaseMs: 600_000 });
    expect(parseRunConfig({ engines, train: { trainer: "external", external: { port: 8400 } } }).train?.external).toEqual({ host: "127.0.0.1", port: 8400, waitMs: 600_000, leaseMs: 600_000 });
  });

  it("rejects bad values, external without trainer external, and async rollout, naming the field", async () => {
    expect(() => parseRunConfig({ engines, train: { trainer: "megatron" } })).toThrow(/train\.trainer: must be 'reference' \(the in-process trainer\) or 'external'/);
    expect(() => parseRunConfig({ engines, train: { external: { port: 1 } } })).toThrow(/train\.external: only used with train\.trainer: external/);
    expect(() => parseRunConfig({ engines, train: { trainer: "reference", external: {} } })).toThrow(/train\.external: only used with train\.trainer: external/);
    expect(() => parseRunConfig({ engines, train: { trainer: "external", external: { port: 70000 } } })).toThrow(/train\.external\.port: must be a TCP port/);
    expect(() => parseRunConfig({ engines, train: { trainer: "external", external: { waitMs: 0 } } })).toThrow(/train\.external\.waitMs/);
    expect(() => parseRunConfig({ engines, train: { trainer: "external", external: { hots: "x" } } })).toThrow(/train\.external: unknown key "hots" \(did you mean "host"\?\)/);
    expect(() => parseRunConfig({ engines, rollout: { mode: "async" }, train: { trainer: "external" } })).toThrow(
      /train\.trainer: external trainers are not supported with rollout\.mode: async yet/,
    );
  });
});
