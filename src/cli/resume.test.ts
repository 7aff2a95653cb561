// `arbor run --resume`: a run SIGKILLed during iteration 2 and resumed to the same number of iterations ends
// where an uninterrupted run of the same config ends — policy version = iterations, every iteration's batch
// holds the same tasks as the uninterrupted run's, and no group is in two batches (the interrupted iteration
// is rolled out again under fresh group ids; the killed attempt's programs end as aborted in the store), and its
// held-out evaluation goes on from the stored scores: the starting policy is not scored again, later versions are
// paired against it, under fresh group ids too.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { readManifest } from "../trainer/checkpoint.js";
import { readResumeState } from "../loop/resume-state.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { summarizeStore } from "./inspect.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { batchGroups } from "../testing/batch-groups.js";

const root = join(import.meta.dirname, "../..");
const ITERATIONS = 3;
const dir = mkdtempSync(join(tmpdir(), "arbor-resume-"));
chmodSync(dir, 0o755);

/** Write a config file (JSON is YAML) of the small RL run writing under `dir/<name>`. */
function config(name: string): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(path, JSON.stringify(smallRlConfig(dir, name, { iterations: ITERATIONS, eval: { tasks: 2, samples: 1, every: 1 } })));
  return path;
}

interface Child {
  stderr: () => string;
  stdout: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill: (sig: NodeJS.Signals) => void;
}

function arbor(args: string[]): Child {
  const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: root });
  let stderr = "";
  let stdout = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { stderr: () => stderr, stdout: () => stdout, exited, kill: (sig) => child.kill(sig) };
}

it("a run killed mid-iteration 2 and resumed trains every iteration's groups once, as the uninterrupted run does", async () => {
  // The uninterrupted run of the same config (another name and folder: task ids and seeds do not depend on them).
  const full = arbor(["run", config("full"), "--no-progress"]);
  expect((await full.exited).code, full.stderr()).toBe(0);

  const out = join(dir, "killed");
  const killed = arbor(["run", config("killed"), "--no-progress"]);
  // SIGKILL once iteration 1 has ended and programs of iteration 2 are under way (created, not ended).
  const storePath = join(out, "store.sqlite");
  let active = 0;
  for (let waited = 0; active === 0 && waited < 240_000; waited += 100) {
    await new Promise((r) => globalThis.setTimeout(r, 100));
    if (!killed.stderr().includes(`iteration 1/${ITERATIONS}`)) continue;
    const peek = new Database(storePath, { readonly: true, fileMustExist: true });
    try {
      active = (peek.prepare("SELECT count(*) AS n FROM programs WHERE termination_kind IS NULL AND id LIKE '%/it2/%'").get() as { n: number }).n;
    } finally {
      peek.close();
    }
  }
  expect(active, killed.stderr()).toBeGreaterThan(0);
  killed.kill("SIGKILL");
  expect((await killed.exited).signal).toBe("SIGKILL");
  const before = readResumeState(out);
  expect(before.completedIterations).toBe(1);
  expect(before.policyVersion).toBe(1);
  expect(before.heldOut?.scores.map((s) => s.version)).toEqual([0, 1]);

  const resumed = arbor(["run", "--resume", out, "--no-progress"]);
  expect((await resumed.exited).code, resumed.stderr()).toBe(0);
  expect(resumed.stderr()).toMatch(new RegExp(`resume   ${before.runId}: 1 of ${ITERATIONS} iterations done, policy v1`));
  expect(resumed.stderr()).not.toMatch(/iteration 1\//);
  // The starting policy's score is the stored one: not taken (nor printed) again; every later one is paired with it.
  expect(resumed.stderr()).not.toMatch(/held-out v0 solved/);
  expect(resumed.stderr().split("\n").filter((l) => l.startsWith("iteration"))).toHaveLength(2);
  for (const l of resumed.stderr().split("\n").filter((x) => x.startsWith("iteration"))) expect(l).toMatch(/held-out v\d solved .* Δ vs v0 /);
  // The summary is the whole run's: its iterations (the one before the kill read back from metrics.jsonl) and versions.
  expect(resumed.stdout()).toMatch(new RegExp(`\n  iterations +${ITERATIONS} \\(2 after the resume\\), policy v0 → v${ITERATIONS}\n`));
  expect(resumed.stdout()).toMatch(/\n {2}reward +-?\d\.\d{3} → -?\d\.\d{3} +\S{3} +\(\S+ \S+ \S+\)\n/);

  const state = readResumeState(out);
  expect(state).toMatchObject({ runId: before.runId, completedIterations: ITERATIONS, policyVersion: ITERATIONS, taskCursor: ITERATIONS * 4, resumes: 1 });
  expect(state.heldOut?.base).toEqual(before.heldOut?.base);
  expect(state.heldOut?.scores.map((s) => [s.version, s.baseVersion])).toEqual([0, 1, 2, 3].map((v) => [v, 0]));
  expect(readManifest(join(out, "checkpoints"))?.version).toBe(ITERATIONS);
  expect(readResumeState(join(dir, "full")).policyVersion).toBe(ITERATIONS);

  const seen = new Set<string>();
  for (let k = 1; k <= ITERATIONS; k++) {
    const mine = batchGroups(join(out, `batch-it${k}.jsonl`));
    const theirs = batchGroups(join(dir, "full", `batch-it${k}.jsonl`));
    expect(mine.size).toBe(4);
    // The same tasks in every iteration, each group once.
    expect([...mine.values()].sort()).toEqual([...theirs.values()].sort());
    for (const g of mine.keys()) {
      expect(seen.has(g), `group ${g} in two batches`).toBe(false);
      seen.add(g);
      // Iteration 2 was rolled out again under a fresh key (fresh group ids) of the same run, the others as usual.
      expect(g.startsWith(`${before.runId}/it${k}${k === 2 ? "-r1" : ""}/g`), g).toBe(true);
    }
  }

  const metrics = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { index: number });
  // The starting policy's held-out line (index 0), then one line per iteration.
  expect(metrics.map((m) => m.index)).toEqual([0, 1, 2, 3]);

  // The killed attempt at iteration 2: every program has an outcome (recovered as aborted), none in a batch.
  const store = new SqliteTrajectoryStore(storePath);
  try {
    // One run: the resumed process reopened it, and it ended once.
    expect((await store.listRuns()).map((r) => r.id)).toEqual([before.runId]);
    expect((await store.getRun(before.runId))?.endedAt).toBeDefined();
    expect((await store.stats(before.runId)).unfinished).toBe(0);
    const killedAttempt = (await store.listTrajectories(before.runId)).filter((t) => t.program.groupId.startsWith(`${before.runId}/it2/`));
    expect(killedAttempt.length).toBeGreaterThan(0);
    expect(killedAttempt.some((t) => t.program.termination?.kind === "aborted")).toBe(true);
    const groups = await store.listGroups(before.runId);
    expect(new Set(groups.filter((g) => g.heldOutVersion === undefined).map((g) => g.iteration))).toEqual(new Set([1, 2, 3]));
    // Held-out groups: versions 0 and 1 from the killed process, 2 and 3 from the resumed one (fresh ids).
    const held = groups.filter((g) => g.heldOutVersion !== undefined).map((g) => g.id.slice(before.runId.length + 1).replace(/\/g\d+$/, ""));
    expect([...new Set(held)].sort()).toEqual(["eval-v0", "eval-v1", "eval-v2-r1", "eval-v3-r1"]);
    // Each group records the process that rolled it out: the resumed one's attempt 1, the killed one's none.
    for (const g of groups) expect(g.attempt, g.id).toBe(/\/(it2-r1|it3|eval-v[23]-r1)\//.test(g.id) ? 1 : undefined);
    // arbor inspect counts the killed attempt's programs apart, not as the run's rollout.
    const [summary] = await summarizeStore(store);
    expect(summary?.superseded?.programs).toBe(killedAttempt.length);
    const trained = (await store.listTrajectories(before.runId)).filter((t) => /\/(it1|it2-r1|it3)\//.test(t.program.groupId));
    expect(summary?.stats.programs).toBe(trained.length);
  } finally {
    await store.close();
  }

  // The finished run, one iteration further: the held-out tasks stay those it drew (its later tasks come after them).
  const further = arbor(["run", "--resume", out, "--set", `iterations=${ITERATIONS + 1}`, "--no-progress"]);
  expect((await further.exited).code, further.stderr()).toBe(0);
  const last = readResumeState(out);
  expect(last).toMatchObject({ completedIterations: ITERATIONS + 1, resumes: 2, heldOutAfter: ITERATIONS });
  expect(last.heldOut?.scores.map((s) => [s.version, s.baseVersion])).toEqual([0, 1, 2, 3, 4].map((v) => [v, 0]));
  const again = new SqliteTrajectoryStore(storePath);
  try {
    const groups = await again.listGroups(before.runId);
    const heldTasks = new Set(groups.filter((g) => g.heldOutVersion !== undefined).map((g) => g.taskId));
    expect(heldTasks.size).toBe(2);
    expect([...batchGroups(join(out, `batch-it${ITERATIONS + 1}.jsonl`)).values()].some((t) => heldTasks.has(t))).toBe(false);
  } finally {
    await again.close();
  }
}, 600_000);
