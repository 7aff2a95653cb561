// `arbor report` as a user runs it: on the output folder of a small real run (the shipped SFT policy on two
// llama.cpp engines, calc, one GRPO iteration; testing/rl-config.ts) it writes the three report files with the
// run's calls as requests and its programs' end times as the CDF, and says what a real run does not record; on
// the folder it wrote (a report.json) it draws the same report again; bad folders fail with one line.
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PNG } from "pngjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import type { SimReport } from "../sim/scenario/sim-report.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { reportCommand } from "./report-command.js";
import { runIteration } from "./run.js";

const root = join(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "arbor-report-"));
// The sandboxes under it run as another uid, which must be able to reach them.
chmodSync(dir, 0o755);
const runDir = join(dir, "tiny");

function arbor(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: dir, encoding: "utf8", timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  const cfg = parseRunConfig(smallRlConfig(dir, "tiny", { iterations: 1, env: { name: "calc", tasks: 2, seed: 7 }, rollout: { groupSize: 2, concurrency: 4 } }));
  await runIteration(cfg, { progress: false, runId: "report-test", log: () => {} });
}, 400_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("arbor report", () => {
  it("renders a real run: report.json with the store's calls as requests, report.html, key-plot.png", async () => {
    const r = arbor("report", runDir);
    expect(r.status, r.stderr).toBe(0);
    const out = join(runDir, "report");
    expect(r.stdout).toContain(`wrote    ${join(out, "report.html")}`);
    expect(r.stdout).toMatch(/^report {3}tiny \(real run\) — tiny: \d+ requests, 4 programs, /);
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as SimReport;
    // What the store holds, read directly.
    const store = new SqliteTrajectoryStore(join(runDir, "store.sqlite"));
    const trajectories = await store.listTrajectories("report-test");
    const started = (await store.getRun("report-test"))!.startedAt;
    await store.close();
    const calls = trajectories.flatMap((t) => t.calls);
    expect(calls.length).toBeGreaterThan(0);
    expect(report.workload).toMatchObject({ name: "tiny", kind: "replay" });
    expect(report.workload.scale).toMatchObject({ runId: "report-test", programs: 4, calls: calls.length, engines: 2, groupSize: 2 });
    const s = report.systems[0]!.summary;
    expect(s.requests).toBe(calls.length);
    expect(s.completed + s.aborted).toBe(s.requests);
    expect(s.programs).toBe(4);
    expect(s.outputTokens).toBe(calls.reduce((n, c) => n + c.outputTokenIds.length, 0));
    // The CDF ends at the last program's end, since the run's start.
    const t0 = Math.min(started, ...trajectories.map((t) => t.program.createdAt), ...calls.map((c) => c.timings.start));
    const lastProgramEnd = Math.max(...trajectories.map((t) => t.program.endedAt!)) - t0;
    expect(report.systems[0]!.completionPercentilesMs[100]).toBe(lastProgramEnd);
    expect(s.makespanMs).toBeGreaterThanOrEqual(lastProgramEnd);
    expect(s.throughputTokensPerS).toBeCloseTo(s.outputTokens / (s.makespanMs / 1000), 6);
    const html = readFileSync(join(out, "report.html"), "utf8");
    expect(html).toContain('<figure id="completion-cdf"');
    expect(html).toContain('<figure id="throughput"');
    expect(html).toContain("KV usage per engine: not recorded for tiny.");
    expect(html).toContain("<td>peak KV usage (% of capacity)</td><td>not recorded</td>");
    expect(html).toContain(">tail: last 10% of programs</text>");
    const png = PNG.sync.read(readFileSync(join(out, "key-plot.png")));
    expect(png.width).toBe(1400);
    expect(png.height).toBeGreaterThan(400);
  });

  it("draws a folder holding a report.json again, to the same report.json", () => {
    const first = join(runDir, "report");
    const again = join(dir, "again");
    const r = arbor("report", first, "--out", again);
    expect(r.status, r.stderr).toBe(0);
    // Drawn from its report.json, it says the report's own kind.
    expect(r.stdout).toMatch(/^report {3}tiny \(replay\) — /);
    expect(readFileSync(join(again, "report.json"), "utf8")).toBe(readFileSync(join(first, "report.json"), "utf8"));
    expect(readFileSync(join(again, "report.html"), "utf8")).toBe(readFileSync(join(first, "report.html"), "utf8"));
  });

  it("fails with one line for a missing folder", () => {
    const r = arbor("report", join(dir, "nope"));
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split("\n")).toEqual([`arbor: error: report: no such folder: ${join(dir, "nope")}`]);
  });

  it("reports a run whose store is elsewhere (--store), the one its folder's metrics.jsonl names, not the store's latest", async () => {
    const folder = join(dir, "cluster-out");
    mkdirSync(folder);
    copyFileSync(join(runDir, "metrics.jsonl"), join(folder, "metrics.jsonl"));
    const shared = join(dir, "shared.sqlite");
    copyFileSync(join(runDir, "store.sqlite"), shared);
    // Another run of the shared store, started later.
    const store = new SqliteTrajectoryStore(shared);
    await store.createRun({ ...fixtureRun("someone-else"), startedAt: Date.UTC(2100, 0, 1) });
    const g = fixtureGroup("someone-else/it1/g0", "someone-else", 1);
    await store.createGroup({ ...g, iteration: 1 });
    await store.createProgram(fixtureProgram(g, 0));
    await store.recordCall(fixtureCall(g.programIds[0]!, 0, [-0.5]));
    await store.endProgram(g.programIds[0]!, { kind: "completed" }, Date.UTC(2100, 0, 1) + 10);
    await store.close();
    const quiet = { log: () => {} };
    await expect(reportCommand(folder, quiet)).rejects.toThrow(/holds neither a run's store\.sqlite nor a report\.json .*pass --store <url>/);
    await reportCommand(folder, { ...quiet, store: shared });
    const report = JSON.parse(readFileSync(join(folder, "report", "report.json"), "utf8")) as SimReport;
    expect(report.workload.scale).toMatchObject({ runId: "report-test", programs: 4 });
    await reportCommand(folder, { ...quiet, store: shared, run: "someone-else", out: join(folder, "other") });
    expect((JSON.parse(readFileSync(join(folder, "other", "report.json"), "utf8")) as SimReport).workload.scale).toMatchObject({ runId: "someone-else", programs: 1 });
  });

  it("names what is wrong with a folder without a run or report, a foreign report.json, an unknown run", async () => {
    mkdirSync(join(dir, "empty"));
    mkdirSync(join(dir, "foreign"));
    writeFileSync(join(dir, "foreign", "report.json"), JSON.stringify({ tasks: [] }));
    const quiet = { log: () => {} };
    await expect(reportCommand(join(dir, "empty"), quiet)).rejects.toThrow(/holds neither a run's store\.sqlite nor a report\.json/);
    await expect(reportCommand(join(dir, "foreign"), quiet)).rejects.toThrow(/format is undefined, expected "arbor-sim-report\/1"/);
    await expect(reportCommand(runDir, { ...quiet, run: "other" })).rejects.toThrow(/report: run 'other' is not in .*\(runs: report-test\)/);
    await expect(reportCommand(join(runDir, "report"), { ...quiet, run: "other" })).rejects.toThrow(/--run applies to a run's folder/);
  });
});
