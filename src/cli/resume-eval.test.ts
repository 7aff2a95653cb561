// `arbor run --resume` after a kill during a held-out evaluation: the iteration before it was trained and its
// weights loaded (resume.json records it as `trained` before the evaluation starts), so the resumed run takes it as
// done — no rollout or trainer step again, its groups in its batch as they were — scores its version first, where
// the starting policy's score would be, writes its metrics line, and goes on with the next iteration. And after a
// kill before iteration 1 was trained: the starting policy's score, once taken, is in resume.json already.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { readResumeState } from "../loop/resume-state.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { batchGroups } from "../testing/batch-groups.js";

const root = join(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "arbor-resume-eval-"));
chmodSync(dir, 0o755);

function arbor(args: string[]): { stderr: () => string; kill: () => void; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> } {
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: root });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { stderr: () => stderr, kill: () => child.kill("SIGKILL"), exited };
}

/** Held-out programs of `version` not ended yet, in the run's store. */
function activeEval(storePath: string, version: number): number {
  const peek = new Database(storePath, { readonly: true, fileMustExist: true });
  try {
    return (peek.prepare(`SELECT count(*) AS n FROM programs WHERE termination_kind IS NULL AND id LIKE '%/eval-v${version}/%'`).get() as { n: number }).n;
  } finally {
    peek.close();
  }
}

it("a run killed during iteration 1's held-out evaluation resumes from iteration 1 trained, evaluating it first", async () => {
  const out = join(dir, "run");
  const config = join(dir, "run.yaml");
  // Enough held-out programs that their evaluation lasts a while on the tiny policy.
  writeFileSync(config, JSON.stringify(smallRlConfig(dir, "run", { iterations: 2, eval: { tasks: 8, samples: 2, every: 1 } })));
  const killed = arbor(["run", config, "--no-progress"]);
  const storePath = join(out, "store.sqlite");
  let caught = false;
  for (let waited = 0; !caught && waited < 240_000; waited += 50) {
    await new Promise((r) => globalThis.setTimeout(r, 50));
    if (!killed.stderr().includes("held-out v0 solved")) continue;
    caught = activeEval(storePath, 1) > 0 && !killed.stderr().includes("iteration 1/2");
  }
  expect(caught, killed.stderr()).toBe(true);
  killed.kill();
  expect((await killed.exited).signal).toBe("SIGKILL");
  const before = readResumeState(out);
  // Iteration 1 was trained and synced; its evaluation had not ended.
  expect(before).toMatchObject({ completedIterations: 0, policyVersion: 0, trained: { completedIterations: 1, policyVersion: 1, taskCursor: 4 } });
  expect(before.heldOut?.scores.map((s) => s.version)).toEqual([0]);
  const batch1 = [...batchGroups(join(out, "batch-it1.jsonl")).keys()].sort();

  const resumed = arbor(["run", "--resume", out, "--no-progress"]);
  expect((await resumed.exited).code, resumed.stderr()).toBe(0);
  const log = resumed.stderr();
  expect(log).toMatch(new RegExp(`resume   ${before.runId}: 1 of 2 iterations done, policy v1`));
  expect(log).toMatch(/resume {3}iteration 1 was trained before the kill cut its report: recorded now, held-out v1 solved .* Δ vs v0 /);
  // Iteration 1 was neither rolled out nor trained again: only iteration 2 ran, and iteration 1's batch is the same.
  expect(log.split("\n").filter((l) => l.startsWith("iteration"))).toEqual([expect.stringMatching(/^iteration 2\/2 /)]);
  expect([...batchGroups(join(out, "batch-it1.jsonl")).keys()].sort()).toEqual(batch1);

  const state = readResumeState(out);
  expect(state).toMatchObject({ completedIterations: 2, policyVersion: 2, taskCursor: 8, resumes: 1 });
  expect(state.trained).toBeUndefined();
  expect(state.heldOut?.scores.map((s) => [s.version, s.baseVersion])).toEqual([0, 1, 2].map((v) => [v, 0]));
  const metrics = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { index: number; heldOut: { version: number } | null });
  expect(metrics.map((m) => [m.index, m.heldOut?.version])).toEqual([
    [0, 0],
    [1, 1],
    [2, 2],
  ]);
  const store = new SqliteTrajectoryStore(storePath);
  try {
    expect((await store.stats(before.runId)).unfinished).toBe(0);
    const groups = await store.listGroups(before.runId);
    // Iteration 1's groups are the killed process's only; its cut evaluation was done again by the resumed one.
    expect(groups.filter((g) => g.heldOutVersion === undefined && g.iteration === 1).every((g) => g.attempt === undefined)).toBe(true);
    const held = groups.filter((g) => g.heldOutVersion !== undefined).map((g) => g.id.slice(before.runId.length + 1).replace(/\/g\d+$/, ""));
    expect([...new Set(held)].sort()).toEqual(["eval-v0", "eval-v1", "eval-v1-r1", "eval-v2-r1"]);
  } finally {
    await store.close();
  }
}, 600_000);

it("a run killed during iteration 1's rollout, after the starting policy was scored, has that score in resume.json (not taken again)", async () => {
  const out = join(dir, "early");
  const config = join(dir, "early.yaml");
  writeFileSync(config, JSON.stringify(smallRlConfig(dir, "early", { iterations: 2, eval: { tasks: 4, samples: 2, every: 1 } })));
  const killed = arbor(["run", config, "--no-progress"]);
  for (let waited = 0; !killed.stderr().includes("held-out v0 solved") && waited < 240_000; waited += 20) await new Promise((r) => globalThis.setTimeout(r, 20));
  killed.kill();
  expect((await killed.exited).signal).toBe("SIGKILL");
  expect(killed.stderr()).toMatch(/held-out v0 solved/);
  const state = readResumeState(out);
  // Killed before iteration 1 was trained; the resumed run reads the starting policy's score from here.
  expect(state).toMatchObject({ completedIterations: 0, policyVersion: 0 });
  expect(state.trained).toBeUndefined();
  expect(state.heldOut?.scores.map((s) => s.version)).toEqual([0]);
  const metrics = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; index: number });
  expect(metrics.map((m) => [m.kind, m.index])).toEqual([["held-out", 0]]);
}, 300_000);
