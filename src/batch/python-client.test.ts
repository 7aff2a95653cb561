// The Python client (python/arbor_client) against the real trainer server: a Python process pulls real batches
// (multi-turn programs with shared prefixes, src/testing/python-fixtures.ts) as safetensors and, where pyarrow
// imports, as Arrow; checks every sample against what this side built; trains through train_loop in the
// protocol's order; and meets the server's refusals. Then the Python unit tests (Batch, the verl/TRL/slime
// adapters' reconstruction, the loop) run on fixtures written here.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectedSamples, pythonFixtureBatch, writePythonFixtures } from "../testing/python-fixtures.js";
import { findPython, noPythonReason, pythonHas } from "../testing/python.js";
import { createTrainerServer, type TrainerServer } from "./trainer-server.js";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
// Prefer an interpreter that reads Arrow too; numpy alone covers the safetensors path.
const python = findPython(["numpy", "pyarrow"]) ?? findPython(["numpy"]);
const skipReason = python ? "" : ` (skipped: ${noPythonReason(["numpy"])})`;
/** Bound on one Python run: the protocol script makes a few dozen local requests, the unit tests a few seconds. */
const PYTHON_TIMEOUT_MS = 120_000;

function runPython(args: string[], env: Record<string, string> = {}): Promise<{ stdout: string; stderr: string }> {
  return run(python as string, args, { cwd: ROOT, timeout: PYTHON_TIMEOUT_MS, env: { ...process.env, PYTHONPATH: join(ROOT, "python"), ...env } });
}

describe(`Python client (python/arbor_client) with ${python ?? "no interpreter"}${skipReason}`, () => {
  let dir: string;
  let server: TrainerServer;
  let address: string;
  const log: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-pyclient-"));
    server = createTrainerServer({
      capacity: 4,
      onWeights: (w) => void log.push(`weights v${w.policyVersion} ${w.modelPath}`),
      onBatch: (event, id, metrics) => void log.push(`${event} ${id}${metrics ? ` ${JSON.stringify(metrics)}` : ""}`),
    });
    const b1 = pythonFixtureBatch("b1", "grpo", "merged");
    const b2 = pythonFixtureBatch("b2", "chunked-mdp", "merged");
    server.offer(b1);
    server.offer(b2);
    writeFileSync(join(dir, "expected.json"), JSON.stringify({ b1: expectedSamples(b1), b2: expectedSamples(b2) }));
    address = await server.app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await server?.app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(!python)("pulls, checks every sample, requeues a failed step, announces then acks, and meets the refusals", async () => {
    const { stdout } = await runPython(["python/tests/protocol_check.py", address, join(dir, "expected.json")]);
    const out = JSON.parse(stdout.trim().split("\n").pop() as string) as Record<string, unknown> & { arrow: boolean };
    expect(out.arrow).toBe(pythonHas(python as string, ["pyarrow"]));
    expect(out.stats0).toMatchObject({ queued: 2, inFlight: 0, policyVersion: 0 });
    // Five samples; the longest prompt is 3 tokens, the longest merged response 9.
    expect(out.verl_shape).toEqual([5, 12]);
    expect(out.failed).toBe("step failed on b1");
    expect(out.stats_after_failure).toMatchObject({ queued: 2, inFlight: 0, acked: 0 });
    expect(out.summary).toEqual({ batch_ids: ["b1", "b2"], versions: [1], skipped: 1 });
    expect(out.seen).toEqual(["b1", "b2"]);
    expect(out.stale).toBe("trainer protocol: POST /v1/weights: HTTP 409 (policy_version: 1 must be greater than the current policy version 1)");
    expect(out.unknown_ack).toBe("trainer protocol: ack nope: HTTP 404 (batch queue: batch 'nope' is not in flight)");
    expect(out.stats).toMatchObject({ queued: 0, inFlight: 0, acked: 2, policyVersion: 1, modelPath: "/w/policy-v1" });
    // What the server saw, in order: the Arrow pull (when pyarrow imports) and the failed step each put b1 back;
    // the weights trained on b1 arrive before its ack, which carries the step's metrics (a NaN left out); b2 brings none.
    const arrowPull = out.arrow ? ["taken b1", "requeued b1"] : [];
    expect(log).toEqual([...arrowPull, "taken b1", "requeued b1", "taken b1", "requeued b1", "taken b1", "weights v1 /w/policy-v1", 'acked b1 {"loss":0.5,"entropy":1.25}', "taken b2", "acked b2"]);
    expect(server.stats()).toMatchObject({ acked: 2, requeued: out.arrow ? 3 : 2 });
  });

  it.skipIf(!python)("passes the Python unit tests (Batch, the verl/TRL/slime adapters' reconstruction, train_loop) on fixtures written here", async () => {
    const fixtures = join(dir, "fixtures");
    rmSync(fixtures, { recursive: true, force: true });
    mkdirSync(fixtures);
    writePythonFixtures(fixtures);
    const { stderr } = await runPython(["-m", "unittest", "discover", "-v", "-s", "python/tests", "-t", "python"], { ARBOR_FIXTURE_DIR: fixtures });
    // unittest reports on stderr; a failure makes the process exit non-zero, which rejects above.
    expect(stderr).toMatch(/\nOK( \(skipped=\d+\))?\n?$/);
    expect(stderr).toMatch(/test_verl_rebuilds_every_sample \(tests\.test_adapters\.AdapterTest\.test_verl_rebuilds_every_sample\) \.\.\. ok/);
    expect(stderr).toMatch(/test_slime_rebuilds_every_sample .* \.\.\. ok/);
    expect(stderr).toMatch(/test_trl_rebuilds_every_sample .* \.\.\. ok/);
  });
});
