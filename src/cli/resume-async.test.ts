// `arbor run --resume` of an async run (rollout.mode: async): a run SIGKILLed after its first trainer step, with
// groups in flight, and resumed to the same number of steps trains every task at most once — the steps done are
// not redone, the tasks they trained on are left out of the resumed run's (same) shuffled order, and the groups
// the kill cut or left untaken are rolled out again under fresh ids (`<run>/r1/g{i}`); the killed process's
// programs end in the store as aborted, counted apart (superseded) by `arbor inspect`.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { readResumeState } from "../loop/resume-state.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { batchGroups } from "../testing/batch-groups.js";
import { summarizeStore } from "./inspect.js";

const root = join(import.meta.dirname, "../..");
const STEPS = 3;
const dir = mkdtempSync(join(tmpdir(), "arbor-resume-async-"));
chmodSync(dir, 0o755);

function arbor(args: string[]): { stderr: () => string; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; kill: () => void } {
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: root });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { stderr: () => stderr, exited, kill: () => child.kill("SIGKILL") };
}

it("an async run killed after step 1 and resumed trains each task at most once, the cut groups again under fresh ids", async () => {
  const path = join(dir, "async.yaml");
  const rollout = { mode: "async", groupSize: 4, concurrency: 8, batchGroups: 2, maxInFlightGroups: 6 };
  writeFileSync(path, JSON.stringify(smallRlConfig(dir, "async", { iterations: STEPS, rollout })));
  const out = join(dir, "async");

  // Killed as soon as step 1 is done: the rollout goes on beside the trainer, so up to 4 more groups are under way
  // (6 in flight at most; 8 programs at once).
  const killed = arbor(["run", path, "--no-progress"]);
  for (let waited = 0; !killed.stderr().includes(`step 1/${STEPS}`) && waited < 240_000; waited += 50) await new Promise((r) => globalThis.setTimeout(r, 50));
  killed.kill();
  expect((await killed.exited).signal, killed.stderr()).toBe("SIGKILL");
  const before = readResumeState(out);
  expect(before).toMatchObject({ completedIterations: 1, policyVersion: 1, taskCursor: 2 });
  expect(new Set(before.consumedTasks).size).toBe(2);
  const step1 = batchGroups(join(out, "batch-step1.jsonl"));
  expect(step1.size).toBe(2);

  const resumed = arbor(["run", "--resume", out, "--no-progress"]);
  expect((await resumed.exited).code, resumed.stderr()).toBe(0);
  expect(resumed.stderr()).toMatch(new RegExp(`resume   ${before.runId}: 1 of ${STEPS} trainer steps done, policy v1`));
  expect(resumed.stderr()).not.toMatch(/^step 1\//m);
  expect(resumed.stderr().split("\n").filter((l) => l.startsWith("step "))).toHaveLength(STEPS - 1);

  const metrics = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { index: number; policyVersionAfter: number });
  expect(metrics.map((m) => m.index)).toEqual([1, 2, 3]);
  const state = readResumeState(out);
  // (A batch whose rewards are all equal has no signal and publishes no version.)
  expect(state).toMatchObject({ runId: before.runId, completedIterations: STEPS, policyVersion: metrics[STEPS - 1]?.policyVersionAfter, taskCursor: 2 * STEPS, resumes: 1 });
  expect(state.consumedTasks?.slice(0, 2)).toEqual(before.consumedTasks);
  expect(new Set(state.consumedTasks).size).toBe(2 * STEPS);

  // Every step's batch: two groups, no task or group twice over the run; steps 2 and 3 of the resumed process.
  const tasks = new Set<string>();
  const groups = new Set<string>();
  for (let k = 1; k <= STEPS; k++) {
    const batch = k === 1 ? step1 : batchGroups(join(out, `batch-step${k}.jsonl`));
    expect(batch.size).toBe(2);
    for (const [g, t] of batch) {
      expect(tasks.has(t), `task ${t} trained twice`).toBe(false);
      expect(groups.has(g), `group ${g} in two batches`).toBe(false);
      tasks.add(t);
      groups.add(g);
      expect(g.startsWith(`${before.runId}/${k === 1 ? "" : "r1/"}g`), g).toBe(true);
    }
  }

  const store = new SqliteTrajectoryStore(join(out, "store.sqlite"));
  try {
    expect((await store.listRuns()).map((r) => r.id)).toEqual([before.runId]);
    expect((await store.stats(before.runId)).unfinished).toBe(0);
    const all = await store.listTrajectories(before.runId);
    // The killed process's groups that no batch took (cut, or finished and waiting): rolled out again, so superseded.
    const untaken = all.filter((t) => !t.program.groupId.startsWith(`${before.runId}/r1/`) && !step1.has(t.program.groupId));
    expect(untaken.length).toBeGreaterThan(0);
    expect(untaken.some((t) => t.program.termination?.kind === "aborted")).toBe(true);
    const [summary] = await summarizeStore(store);
    expect(summary?.superseded?.programs).toBe(untaken.length);
    expect(summary?.stats.programs).toBe(all.length - untaken.length);
    for (const g of await store.listGroups(before.runId)) expect(g.attempt, g.id).toBe(g.id.startsWith(`${before.runId}/r1/`) ? 1 : undefined);
  } finally {
    await store.close();
  }
  // The same command retried after the end (a job's retry) has nothing to do.
  const again = arbor(["run", path, "--continue", "--no-progress"]);
  expect((await again.exited).code, again.stderr()).toBe(0);
  expect(again.stderr()).toContain(`continue ${out}: its run has done all ${STEPS} trainer steps, nothing to continue`);
}, 600_000);
