// examples/custom-env end to end (issue 19: "runs through arbor run with a task file and a custom reward"): its
// environment module passes the environment contract the shipped ones pass, on the tasks of its file; then
// `arbor run` runs the example as shipped (the tiny SFT policy, two iterations with training) and the store says
// the programs ran on the file's tasks, slice by slice, each rewarded with the custom `tool-success` and `brevity`
// components.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { environmentContract } from "../envs/environment.contract.js";
import { loadModuleEnvironment } from "../envs/module-environment.js";
import { loadTaskFile } from "../envs/task-file.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import type { RunSummary as InspectRun } from "./inspect.js";

const root = join(import.meta.dirname, "../..");
const example = join(root, "examples/custom-env");

describe("examples/custom-env/my-env.ts", () => {
  environmentContract("shop", () => loadModuleEnvironment(join(example, "my-env.ts")), { count: 20, tasks: () => loadTaskFile(join(example, "tasks.jsonl"), "shop") });
});

describe("arbor run examples/custom-env/config.yaml", () => {
  let dir: string;
  let run: { status: number | null; stdout: string; stderr: string };
  let runs: InspectRun[];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-custom-env-"));
    chmodSync(dir, 0o755);
    const arbor = (...args: string[]) => spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), ...args], { cwd: root, encoding: "utf8", timeout: 400_000 });
    // As shipped, but for where it writes (model.path is relative to the repository root, the working directory).
    run = arbor("run", "examples/custom-env/config.yaml", "--no-progress", "--set", `output.dir=${join(dir, "out")}`, "--set", `sandbox.root=${join(dir, "sandboxes")}`);
    const inspected = arbor("inspect", join(dir, "out", "store.sqlite"), "--json");
    expect(inspected.status, inspected.stderr).toBe(0);
    runs = (JSON.parse(inspected.stdout) as { runs: InspectRun[] }).runs;
  }, 450_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("loads the module, the task file and the custom rewards, and trains for both iterations", () => {
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^env {6}shop \(.*examples\/custom-env\/my-env\.ts\): 6 tasks from .*examples\/custom-env\/tasks\.jsonl, 3 per iteration$/m);
    expect(run.stderr).toMatch(/^agent {4}shop-agent \(.*examples\/custom-env\/my-agent\.ts\)$/m);
    expect(run.stderr).toMatch(/^iteration 1\/2 .*brevity .*tool-success .*policy v0 → v1$/m);
    expect(run.stderr).toMatch(/^iteration 2\/2 .*policy v1 → v2$/m);
    expect(run.stdout).toMatch(/^ {4}tool-success +\d/m);
    expect(run.stdout).toMatch(/^ {4}brevity +\d/m);
  });

  it("one run whose iterations each ran the next slice of the file's tasks, every program with model calls", () => {
    expect(runs).toHaveLength(1);
    expect(runs.map((r) => r.env)).toEqual(["module my-env.ts"]);
    const programs = runs[0]!.programs;
    const tasksOf = (k: number) => [...new Set(programs.filter((p) => p.iteration === k).map((p) => p.taskId))];
    expect(tasksOf(1)).toEqual(["shop-file-0", "shop-file-1", "shop-file-2"]);
    expect(tasksOf(2)).toEqual(["shop-file-3", "shop-file-4", "shop-file-5"]);
    expect(programs).toHaveLength(24);
    for (const p of programs) expect(p.calls, p.id).toBeGreaterThan(0);
  });

  it("stores the custom rewards as components of every program's reward, weighted 0.5 and 0.1 in the total", async () => {
    const programs = runs.flatMap((r) => r.programs);
    for (const p of programs) {
      expect(Object.keys(p.components ?? {}).sort(), p.id).toEqual(["brevity", "outcome", "tool-success"]);
      const c = p.components as Record<string, number>;
      expect(c["tool-success"]).toBeGreaterThanOrEqual(0);
      expect(c["tool-success"]).toBeLessThanOrEqual(1);
      // brevity: the share of the 96-token budget left unused.
      expect(c.brevity).toBeCloseTo(1 - p.outputTokens / 96, 9);
      expect(p.reward).toBeCloseTo(c.outcome! + 0.5 * c["tool-success"]! + 0.1 * c.brevity!, 9);
    }
    // The component is the share of the program's recorded tool calls that succeeded (none called: 0), and the
    // policy does call its tools, so some programs score above 0.
    const store = new SqliteTrajectoryStore(join(dir, "out", "store.sqlite"));
    try {
      const stored = new Map((await Promise.all(runs.map((r) => store.listTrajectories(r.id)))).flat().map((t) => [t.program.id, t]));
      let called = 0;
      for (const p of programs) {
        const tools = (stored.get(p.id)?.tools ?? []).filter((t) => !t.tool.startsWith("arbor:"));
        if (tools.length > 0) called++;
        expect(p.components!["tool-success"], p.id).toBe(tools.length === 0 ? 0 : tools.filter((t) => t.ok).length / tools.length);
      }
      expect(called).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });
});

describe("arbor run with a wrong module or task file", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-custom-env-errors-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The example's config with one setting changed: it must stop before starting anything, with one line. */
  function runWith(set: string): string {
    const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "run", "examples/custom-env/config.yaml", "--no-progress", "--set", set, "--set", `output.dir=${join(dir, "out")}`], { cwd: root, encoding: "utf8", timeout: 120_000 });
    expect(r.status, r.stderr).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines, r.stderr).toHaveLength(1);
    return lines[0] as string;
  }

  it("names the missing module, the missing export, and the task file's bad line", () => {
    expect(runWith("env.module=./no-such-env.ts")).toMatch(/^arbor: error: env\.module: module \/.*examples\/custom-env\/no-such-env\.ts not found$/);
    expect(runWith("reward.custom=./my-reward.ts#score")).toMatch(/^arbor: error: reward\.custom: .*my-reward\.ts has no export 'score' \(exports: brevity, toolSuccess\)$/);
    const bad = join(dir, "bad.jsonl");
    writeFileSync(bad, `${JSON.stringify({ id: "a", prompt: [{ role: "user", content: "hi" }], meta: {} })}\n${JSON.stringify({ id: "b", prompt: [{ role: "user" }], meta: {} })}\n`);
    expect(runWith(`env.tasks=${bad}`)).toMatch(/^arbor: error: env\.tasks: .*bad\.jsonl:2: prompt\[0\]\.content must be a string$/);
  });
});
