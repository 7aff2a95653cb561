// Held-out evaluation in a real run (issue 20): the small RL run with `eval`, on the real stack. Checks that
// every version due is scored on the same held-out (task, sample) pairs by programs served at that version,
// that no held-out task is trained on and no held-out program reaches a batch, and that the score reaches
// the iteration lines, metrics.jsonl, TensorBoard's scalars, the plot and the summary.
import { chmodSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { readTfEvents } from "../testing/tfevents-reader.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { exportStore } from "../batch/export-store.js";
import { readSamplesJsonl } from "../batch/export-jsonl.js";
import { summarizeStore } from "./inspect.js";
import { runIteration, type RunSummary } from "./run.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-heldout-"));
chmodSync(dir, 0o755);
const out = join(dir, "out");
const lines: string[] = [];
let summary: RunSummary;

beforeAll(async () => {
  const cfg = parseRunConfig(smallRlConfig(dir, "heldout", { iterations: 2, eval: { tasks: 3, samples: 2, every: 1 }, output: { dir: out } }));
  summary = await runIteration(cfg, { progress: false, runId: "heldout", log: (line) => lines.push(line) });
}, 300_000);

describe("arbor run with held-out evaluation (end to end)", () => {
  it("scores version 0 and each new version on the same held-out pairs, pairing each with version 0", () => {
    const scores = summary.heldOut ?? [];
    expect(scores.map((s) => s.version)).toEqual([0, 1, 2]);
    for (const s of scores) expect([s.tasks, s.samples, s.solved.n, s.baseVersion]).toEqual([3, 2, 3, 0]);
    expect(scores[0]?.diff).toBeUndefined();
    expect(scores[1]?.diff?.n).toBe(3);
    expect(scores[2]?.diff?.mean).toBeCloseTo((scores[2]?.solved.mean ?? NaN) - (scores[0]?.solved.mean ?? NaN), 12);
  });

  it("runs held-out programs through the gateway at the version evaluated, in the run's own store id, in held-out groups no batch takes from", async () => {
    const store = new SqliteTrajectoryStore(join(out, "store.sqlite"));
    try {
      // One store run: the training groups and the held-out ones belong to it.
      expect((await store.listRuns()).map((r) => r.id)).toEqual(["heldout"]);
      const groups = await store.listGroups("heldout");
      const heldGroups = new Map(groups.filter((g) => g.heldOutVersion !== undefined).map((g) => [g.id, g]));
      expect([...heldGroups.keys()].sort()).toEqual([0, 1, 2].flatMap((v) => [0, 1, 2].map((i) => `heldout/eval-v${v}/g${i}`)));
      for (const g of heldGroups.values()) expect(g.iteration).toBeUndefined();
      const all = await store.listTrajectories("heldout");
      const held = all.filter((t) => heldGroups.has(t.program.groupId));
      expect(held).toHaveLength(3 * 2 * 3);
      for (const t of held) {
        const version = heldGroups.get(t.program.groupId)?.heldOutVersion;
        expect(t.program.id.startsWith(`heldout/eval-v${version}/`)).toBe(true);
        // Served by the engines, each call at the version being evaluated.
        expect(t.calls.length).toBeGreaterThan(0);
        for (const c of t.calls) expect(c.policyVersion).toBe(version);
        expect(t.reward?.components).toHaveProperty("outcome");
      }
      const heldTasks = new Set(held.map((t) => t.program.taskId));
      expect(heldTasks.size).toBe(3);
      // Each version ran every held-out (task, sample) pair once.
      for (const v of [0, 1, 2]) expect(new Set(held.filter((t) => heldGroups.get(t.program.groupId)?.heldOutVersion === v).map((t) => `${t.program.taskId}/${t.program.sampleIndex}`)).size).toBe(6);
      const heldIds = new Set(held.map((t) => t.program.id));
      // The batches the trainer got: no held-out program, no held-out task.
      const batches = readdirSync(out).filter((f) => /^batch-it\d+\.jsonl$/.test(f));
      expect(batches).toHaveLength(2);
      let samples = 0;
      for (const f of batches) {
        for (const line of readFileSync(join(out, f), "utf8").trim().split("\n")) {
          const s = JSON.parse(line) as { programId: string; taskId: string };
          samples++;
          expect(heldIds.has(s.programId)).toBe(false);
          expect(heldTasks.has(s.taskId)).toBe(false);
        }
      }
      expect(samples).toBeGreaterThan(0);
      expect(groups.map((g) => g.iteration)).toContain(2);
      for (const t of all) if (!heldIds.has(t.program.id)) expect(heldTasks.has(t.program.taskId)).toBe(false);
      // `arbor export`: one batch per iteration, none from the held-out groups; their rows are marked.
      const exported = await exportStore(store, { format: "jsonl", out: join(dir, "export") });
      expect(exported.batches.map((b) => b.iteration)).toEqual([1, 2]);
      for (const b of exported.batches) for (const s of await readSamplesJsonl(b.path)) expect(heldIds.has(s.programId)).toBe(false);
      const rows = readFileSync(exported.trajectoriesPath, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { program_id: string; held_out_version: number | null; batch_id: string | null });
      for (const r of rows) expect(r.held_out_version !== null).toBe(heldIds.has(r.program_id));
      expect(rows.filter((r) => r.held_out_version !== null).every((r) => r.batch_id === null)).toBe(true);
      // `arbor inspect` (and the dashboard, which reads the same summary): held-out programs marked and counted apart.
      const [run] = await summarizeStore(store);
      expect(run?.heldOut?.programs).toBe(18);
      // Each version's mean outcome apart (every task has as many samples, so it is the version's solved rate).
      expect(run?.heldOutVersions.map((v) => [v.version, v.programs])).toEqual([[0, 6], [1, 6], [2, 6]]);
      for (const [i, v] of (run?.heldOutVersions ?? []).entries()) expect(v.meanReward).toBeCloseTo(summary.heldOut?.[i]?.solved.mean ?? NaN, 12);
      expect(run?.stats.programs).toBe(all.length - 18);
      for (const p of run?.programs ?? []) expect(p.heldOutVersion !== null).toBe(heldIds.has(p.id));
    } finally {
      await store.close();
    }
  });

  it("prints the score, writes it to metrics.jsonl, TensorBoard and the plot, and sums it up", () => {
    expect(lines.some((l) => /^eval {5}held-out v0 solved \d+\.\d% ± \d+\.\d \(3 tasks × 2\) at temperature 1$/.test(l))).toBe(true);
    expect(lines.filter((l) => l.startsWith("iteration")).every((l) => /held-out v\d solved .* Δ vs v0 [+-]\d+\.\d ± \d+\.\d pts/.test(l))).toBe(true);
    const recs = readFileSync(summary.metricsPath, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; heldOut: { version: number; diff: number | null } | null });
    expect(recs.map((r) => [r.kind, r.heldOut?.version])).toEqual([
      ["held-out", 0],
      ["iteration", 1],
      ["iteration", 2],
    ]);
    const tags = readTfEvents(summary.tensorboardPath).flatMap((e) => Object.keys(e.scalars ?? {}).map((k) => `${e.step}:${k}`));
    expect(tags).toEqual(expect.arrayContaining(["0:heldout/solved", "1:heldout/diff", "2:heldout/diff_se"]));
    expect(readFileSync(summary.rewardPlot as string, "utf8")).toContain("held-out v2:");
  });
});
