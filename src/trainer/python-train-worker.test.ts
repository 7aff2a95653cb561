// The PyTorch train worker (python -m arbor_client.train_worker) against a real trainer protocol server with
// batches from the real batch builder, as src/cli/train-worker.test.ts runs the TS worker: it starts from the HF
// export of models/calc-sft.gguf, steps on the batch with signal, writes policy-v1/ (an HF checkpoint that
// `arbor hf convert` turns into a GGUF the TS trainer loads, with moved weights), announces it while the batch
// is in flight and then acks; the batch without signal is acked unannounced; started again from that policy-v1/ (a
// resumed run), it loads the Adam state written there; SIGTERM once it holds a batch gives the batch back and exits
// 143. Needs an interpreter with torch and numpy (testing/python.ts); skipped, saying why, otherwise.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { buildTrainingBatch } from "../batch/build-batch.js";
import type { ExportedBatch } from "../batch/export-arrow.js";
import { createTrainerServer, type StepMetrics, type TrainerServerStats, type WeightsAnnouncement } from "../batch/trainer-server.js";
import { readGguf } from "../model/gguf.js";
import { convertHfToGguf } from "../model/hf/hf-convert.js";
import { exportHfCheckpoint } from "../model/hf/hf-export.js";
import { findPython, noPythonReason } from "../testing/python.js";
import { specTrajectories, type BatchSpec } from "../testing/test-batches.js";
import { Trainer } from "./trainer.js";

const PYTHON_DIR = fileURLToPath(new URL("../../python", import.meta.url));
const FROM = "models/calc-sft.gguf";
/** Bound on the worker's run (torch import, two batches on a tiny model). */
const WORKER_TIMEOUT_MS = 120_000;

const TORCH = ["torch", "numpy"];
const PYTHON = findPython(TORCH);
/** Why the suite cannot run here, or "" when it can. */
const MISSING = PYTHON === undefined ? noPythonReason(TORCH) : "";

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

/**
 * Run the worker to its exit (killed after WORKER_TIMEOUT_MS); resolves with its exit code, signal and output.
 * `started` receives the process (to signal it).
 */
function runWorker(args: string[], started?: (child: ChildProcess) => void): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON as string, ["-m", "arbor_client.train_worker", ...args], {
      env: { ...process.env, PYTHONPATH: PYTHON_DIR },
      timeout: WORKER_TIMEOUT_MS,
      killSignal: "SIGKILL",
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ code, signal, out }));
    started?.(child);
  });
}

describe.skipIf(MISSING !== "")(`python -m arbor_client.train_worker${MISSING ? ` — skipped: ${MISSING}` : ""}`, () => {
  const dir = mkdtempSync(join(tmpdir(), "arbor-py-worker-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("steps on a batch with signal, announces policy-v1/ before acking, acks a batch without signal unannounced", async () => {
    const hf = join(dir, "hf");
    exportHfCheckpoint(FROM, hf);
    const announced: (WeightsAnnouncement & { at: TrainerServerStats })[] = [];
    const acks: [string, StepMetrics | undefined][] = [];
    const server = createTrainerServer({
      capacity: 4,
      initialPolicyVersion: 0,
      onWeights: (w) => void announced.push({ ...w, at: server.stats() }),
      onBatch: (event, id, metrics) => void (event === "acked" && acks.push([id, metrics])),
    });
    server.offer(batch("b1", [0, 1, 0.5]));
    server.offer(batch("b2", [1, 1, 1]));
    const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
    const outDir = join(dir, "out");
    try {
      const r = await runWorker(["--url", url, "--from", hf, "--out-dir", outDir, "--batches", "2", "--poll-s", "0.05", "--lr", "1e-3"]);
      expect(r.signal, `killed after ${WORKER_TIMEOUT_MS} ms?\n${r.out}`).toBeNull();
      expect(r.code, r.out).toBe(0);
      const ckpt = join(outDir, "policy-v1");
      expect(announced.map((a) => [a.policyVersion, a.modelPath])).toEqual([[1, ckpt]]);
      expect(announced[0]?.at).toMatchObject({ inFlight: 1, acked: 0 });
      expect(server.stats()).toMatchObject({ acked: 2, inFlight: 0, queued: 0, policyVersion: 1, modelPath: ckpt });
      expect(r.out).toMatch(/batch b2: no term carries an advantage; acked without a step/);
      // The step's metrics came with b1's ack (the run records them): a policy entropy between 0 and log(vocab).
      expect(acks.map(([id, m]) => [id, Object.keys(m ?? {}).sort()])).toEqual([
        ["b1", ["entropy", "gradNorm", "loss"]],
        ["b2", []],
      ]);
      const entropy = acks[0]?.[1]?.entropy as number;
      expect(entropy).toBeGreaterThan(0);
      const start = await Trainer.fromGguf(FROM);
      const vocab = start.config.nVocab;
      start.dispose();
      expect(entropy).toBeLessThan(Math.log(vocab));
    } finally {
      await server.app.close();
    }

    const gguf = join(dir, "policy-v1.gguf");
    convertHfToGguf(join(outDir, "policy-v1"), gguf);
    const start = new Map(readGguf(FROM).tensors.map((t) => [t.name, t.data]));
    const after = readGguf(gguf).tensors;
    expect(after.map((t) => t.name).sort()).toEqual([...start.keys()].sort());
    expect(after.some((t) => t.data.some((x, i) => x !== start.get(t.name)?.[i]))).toBe(true);
    const tr = await Trainer.fromGguf(gguf);
    tr.dispose();
  });

  it("started again on a resumed run from policy-v1/, at the server's version, with the Adam state written there", async () => {
    const outDir = join(dir, "out");
    const server = createTrainerServer({ capacity: 2, initialPolicyVersion: 1, initialModelPath: join(outDir, "policy-v1"), onWeights: () => {} });
    server.offer(batch("b3", [1, 0, 0.5]));
    const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const r = await runWorker(["--url", url, "--from", join(outDir, "policy-v1"), "--out-dir", outDir, "--batches", "1", "--poll-s", "0.05"]);
      expect(r.code, r.out).toBe(0);
      expect(r.out).toContain(`from policy version 1 with its optimizer state (${join(outDir, "policy-v1", "adam.pt")})`);
      expect(server.stats()).toMatchObject({ acked: 1, policyVersion: 2, modelPath: join(outDir, "policy-v2") });
    } finally {
      await server.app.close();
    }
  });

  it("SIGTERM while it holds a batch gives the batch back at once and exits 143", async () => {
    const hf = join(dir, "hf");
    let worker: ChildProcess | undefined;
    // The signal goes out as the batch is taken: the worker is then between its pull and its announcement.
    const server = createTrainerServer({ capacity: 2, initialPolicyVersion: 0, onWeights: () => {}, onBatch: (event) => void (event === "taken" && worker?.kill("SIGTERM")) });
    server.offer(batch("b4", [1, 0, 0.5]));
    const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const r = await runWorker(["--url", url, "--from", hf, "--out-dir", join(dir, "out-term"), "--poll-s", "0.05"], (child) => (worker = child));
      expect(r.code, r.out).toBe(143);
      expect(r.out).toContain("train-worker: SIGTERM: stopped; batch b4 given back to the server");
      expect(r.out).not.toContain("Traceback");
      // Back in the queue for the next trainer, not in flight for the whole lease.
      expect(server.stats()).toMatchObject({ queued: 1, inFlight: 0, acked: 0, requeued: 1, policyVersion: 0 });
    } finally {
      await server.app.close();
    }
  });
});
