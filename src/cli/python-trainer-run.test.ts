// `arbor run` with train.trainer: external trained by the PyTorch reference trainer (python -m
// arbor_client.train_worker) for two iterations, end to end on the real stack: the worker starts from the HF
// export of the shipped SFT policy, pulls each iteration's batch over the trainer protocol, steps, writes an HF
// checkpoint (policy-vN/), announces it and acks. The run converts each checkpoint to GGUF once and loads it on
// an in-process engine and, where a llama-server is built (scripts/setup.sh --llama-server), on an
// Arbor-managed llama-server restarted on it (weightSync.kind: llamacpp-restart). Every engine ends on
// version 2 and every call of iteration k was served by the version acknowledged before it.
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { findLlamaServer } from "../backends/llama-server-binary.js";
import { parseRunConfig } from "../core/config.js";
import { exportHfCheckpoint } from "../model/hf/hf-export.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { findPython, noPythonReason } from "../testing/python.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { runIteration, type RunSummary } from "./run.js";
import { iterationTrajectories } from "../testing/iteration-trajectories.js";

const PYTHON_DIR = fileURLToPath(new URL("../../python", import.meta.url));
const MODULES = ["torch", "numpy"];
const PYTHON = findPython(MODULES);
const llama = findLlamaServer();
const LLAMA = "path" in llama;
const dir = mkdtempSync(join(tmpdir(), "arbor-py-trainer-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);
const FROM = "models/calc-sft.gguf";

/** The worker's exit and output. */
interface WorkerExit {
  code: number | null;
  out: string;
}

describe.skipIf(PYTHON === undefined)(`arbor run trained by the PyTorch worker${PYTHON === undefined ? ` (skipped: ${noPythonReason(MODULES)})` : ""}${LLAMA ? "" : ` (without the managed llama-server: ${(llama as { missing: string }).missing})`}`, () => {
  const workerOut = join(dir, "worker");
  /** The worker writes the run's checkpoints in a folder of their own (the run GET /v1/stats names). */
  const runOut = join(workerOut, "py-e2e");
  const lines: string[] = [];
  /** Every successful engine answer, as the adapter received it (before the version is stamped): backend and ids. */
  const replies: string[] = [];
  let summary: RunSummary;
  let worker: WorkerExit;

  beforeAll(async () => {
    const hf = join(dir, "start-hf");
    exportHfCheckpoint(FROM, hf);
    const cfg = parseRunConfig(
      smallRlConfig(dir, "py-e2e", {
        model: { path: FROM },
        engines: [{ name: "e0", sequences: 4, contextSize: 1024 }],
        backends: [
          { name: "e0", type: "builtin" },
          ...(LLAMA ? [{ name: "ls0", type: "llamacpp", weightSync: { kind: "llamacpp-restart", args: ["-c", "4096", "-np", "4"], slots: "save" } }] : []),
        ],
        env: { name: "calc", tasks: 2, seed: 7 },
        iterations: 2,
        // Wall times never tie: a small completion-time term open to every completed program gives each group a
        // spread, so both iterations carry signal and the worker steps on both.
        reward: { outcome: 1, process: 1, "completion-time": 0.01, options: { "completion-time": { minOutcome: -1e9 } } },
        train: { estimator: "grpo", trainer: "external", external: { waitMs: 300_000 } },
      }),
    );
    let started: Promise<WorkerExit> | undefined;
    summary = await runIteration(cfg, {
      progress: false,
      runId: "py-e2e",
      log: (line) => {
        lines.push(line);
        const url = /^trainer {2}(http:\/\/\S+) \(external: waiting for a trainer\)$/.exec(line)?.[1];
        if (url !== undefined) started = runWorker(["--url", url, "--from", hf, "--out-dir", workerOut, "--lr", "3e-3", "--batches", "2", "--poll-s", "0.05"]);
      },
      onBackendReply: (backend, reply) => {
        if (reply.status === 200 && Array.isArray(reply.json.choices)) {
          replies.push(`${backend} ${(reply.json.prompt_token_ids as number[]).join()}|${(reply.json.choices[0].token_ids as number[]).join()}`);
        }
      },
    });
    expect(started, "the run printed no trainer URL").toBeDefined();
    worker = await (started as Promise<WorkerExit>);
  }, 600_000);

  it("trains both iterations in torch; every engine ends on version 2", () => {
    expect(worker.code, worker.out).toBe(0);
    expect(summary.iterations.map((r) => [r.policyVersion, r.update?.stepped, r.update?.version])).toEqual([
      [0, true, 1],
      [1, true, 2],
    ]);
    expect(summary.iterations.map((r) => r.update?.checkpoint)).toEqual([join(runOut, "policy-v1"), join(runOut, "policy-v2")]);
    // The HF checkpoints were converted once to the GGUF the llama.cpp engines load.
    for (const v of [1, 2]) expect(existsSync(join(runOut, `policy-v${v}.gguf`))).toBe(true);
    expect(summary.policyVersion).toBe(2);
    expect(summary.engineVersions).toEqual([2]);
    if (LLAMA) expect(summary.backendVersions).toEqual([{ name: "ls0", version: 2 }]);
  });

  it("serves every call of iteration k with the version acknowledged before it, on every engine; records each answer once", async () => {
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      const all = (await Promise.all(summary.iterations.map((r) => iterationTrajectories(store, r.runId, r.iteration)))).flat().flatMap((t) => t.calls);
      // Nothing recorded twice: one call per engine answer, each answer's ids recorded exactly once.
      expect(new Set(all.map((c) => c.id)).size).toBe(all.length);
      expect(all.length).toBe(replies.length);
      const recorded = all.map((c) => `${c.backend} ${c.promptTokenIds.join()}|${c.outputTokenIds.join()}`).sort();
      const answered = [...replies].sort();
      // Compared without printing thousands of ids on failure.
      expect(recorded.every((c, i) => c === answered[i]), "recorded calls differ from the engines' answers").toBe(true);
      // Every program's first prompt starts with the same system turn, token for token, whichever engine rendered
      // it (Arbor's engine renders its own template; the managed llama-server gets it as Jinja).
      const firsts = (await Promise.all(summary.iterations.map((r) => iterationTrajectories(store, r.runId, r.iteration)))).flat().map((t) => t.calls[0]!);
      const head = (c: (typeof firsts)[number]) => c.promptTokenIds.slice(0, 40).join();
      expect(new Set(firsts.map(head)).size).toBe(1);
      for (const r of summary.iterations) {
        const calls = (await iterationTrajectories(store, r.runId, r.iteration)).flatMap((t) => t.calls);
        expect(calls.length).toBeGreaterThanOrEqual(8);
        expect(new Set(calls.map((c) => c.policyVersion))).toEqual(new Set([r.policyVersion]));
        // Both engines served calls of this iteration (the router spreads programs).
        if (LLAMA) expect(new Set(calls.map((c) => c.backend))).toEqual(new Set(["e0", "ls0"]));
      }
    } finally {
      await store.close();
    }
  });

  it.runIf(LLAMA)("restarts the managed llama-server on each version and logs each switch", () => {
    const switches = lines.filter((l) => /^weights {2}ls0: serving policy version \d/.test(l));
    expect(switches.map((l) => /version (\d+)/.exec(l)?.[1])).toEqual(["1", "2"]);
    expect(lines.some((l) => /^engine {3}http:\/\/127\.0\.0\.1:\d+ \(ls0: llama-server managed by Arbor/.test(l))).toBe(true);
  });
});

/** Run the PyTorch worker to its exit (killed after 5 minutes). */
function runWorker(args: string[]): Promise<WorkerExit> {
  return new Promise((resolve) => {
    const child = spawn(PYTHON as string, ["-m", "arbor_client.train_worker", ...args], {
      env: { ...process.env, PYTHONPATH: PYTHON_DIR },
      timeout: 300_000,
      killSignal: "SIGKILL",
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("close", (code) => resolve({ code, out }));
    child.on("error", (e) => resolve({ code: -1, out: `${out}\n${e.message}` }));
  });
}
