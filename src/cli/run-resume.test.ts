// The config `arbor run --resume` continues with: the stored one (with --set), or the file given again; any
// difference but more iterations is refused naming it, as are a run that is done and a moved folder. A run on a
// deployment resumes on it: its stored run part merged again with the cluster file given with --cluster.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { clusterRunConfig, parseClusterConfig, withoutDeploymentKeys } from "../core/cluster-config.js";
import { parseRunConfig } from "../core/config.js";
import { parseOverride } from "../core/config-overrides.js";
import { writeResumeState } from "../loop/resume-state.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { loadResumedRun } from "./run-resume.js";

const root = mkdtempSync(join(tmpdir(), "arbor-run-resume-"));
chmodSync(root, 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));
const raw = smallRlConfig(root, "r", { iterations: 3 });
const out = join(root, "r");
const cfg = parseRunConfig(raw);
writeFileSync(join(root, "r.yaml"), JSON.stringify(raw));
const base = { format: 1 as const, runId: "r-1", config: cfg, taskCursor: 4, policyVersion: 0, resumes: 0, updatedAt: 0 };

it("continues with the stored config, or the same file; more iterations through --set", () => {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  writeResumeState(out, { ...base, completedIterations: 1 });
  expect(loadResumedRun(out, undefined, []).cfg).toEqual(cfg);
  expect(loadResumedRun(out, join(root, "r.yaml"), []).state.runId).toBe("r-1");
  expect(loadResumedRun(out, undefined, [parseOverride("iterations=5")]).cfg.iterations).toBe(5);
});

it("refuses another config, a finished run and a run folder that is not output.dir", () => {
  mkdirSync(out, { recursive: true });
  writeResumeState(out, { ...base, completedIterations: 1 });
  expect(() => loadResumedRun(out, undefined, [parseOverride("agent.temperature=0.5")])).toThrow(/the config is not the run's \(agent\.temperature: stored 1, given 0\.5\)/);
  writeResumeState(out, { ...base, completedIterations: 3 });
  expect(() => loadResumedRun(out, undefined, [])).toThrow(/has done all 3 iterations; raise iterations \(e\.g\. --set iterations=4\)/);
  const moved = join(root, "moved");
  mkdirSync(moved, { recursive: true });
  writeResumeState(moved, { ...base, completedIterations: 1 });
  expect(() => loadResumedRun(moved, undefined, [])).toThrow(`the run's output.dir is ${out}`);
});

it("resumes a run of a deployment on the same deployment only, its run part merged again with the cluster file", () => {
  const file = {
    name: "c1",
    store: { kind: "postgres", url: "postgres://postgres@db:5432/arbor" },
    engines: [{ name: "e0", host: "0.0.0.0", port: 8101, sequences: 4 }],
    backends: [{ name: "e0", type: "builtin", url: "http://e0:8101/v1" }],
    gateway: { host: "0.0.0.0", port: 8100 },
  };
  const cluster = parseClusterConfig(file);
  const onCluster = clusterRunConfig(withoutDeploymentKeys(raw), cluster, "test");
  const dir = join(root, "c");
  mkdirSync(dir, { recursive: true });
  writeResumeState(dir, { ...base, config: { ...onCluster, output: { dir } }, completedIterations: 1, cluster: "c1" });
  const cfg = { ...onCluster, output: { dir } };
  expect(loadResumedRun(dir, undefined, [], cluster).cfg).toEqual(cfg);
  expect(loadResumedRun(dir, undefined, [parseOverride("iterations=4")], cluster).cfg.iterations).toBe(4);
  expect(() => loadResumedRun(dir, undefined, [])).toThrow(`--resume ${dir}: the run ran on the deployment 'c1': give its cluster file (--cluster <file>)`);
  expect(() => loadResumedRun(dir, undefined, [], parseClusterConfig({ ...file, name: "c2" }))).toThrow("the run ran on the deployment 'c1', and this cluster file is 'c2' (its name)");
  // The deployment's parts come from the file: a changed one is another run, and --set cannot reach them.
  const bigger = parseClusterConfig({ ...file, engines: [{ ...file.engines[0], sequences: 8 }] });
  expect(() => loadResumedRun(dir, undefined, [], bigger)).toThrow("the config is not the run's (engines.0.sequences: stored 4, given 8)");
  expect(() => loadResumedRun(dir, undefined, [parseOverride("store.schema=x")], cluster)).toThrow(/store: given by the cluster file with --cluster/);
  // A run in one process is resumed in one process.
  writeResumeState(out, { ...base, completedIterations: 1 });
  expect(() => loadResumedRun(out, undefined, [], cluster)).toThrow(`--resume ${out}: the run ran in one process, not on a deployment: resume it without --cluster`);
});

it("--continue on a run that has done all its iterations: nothing to do, said, exit 0 (a job retried after its end)", () => {
  mkdirSync(out, { recursive: true });
  writeResumeState(out, { ...base, completedIterations: 3 });
  const r = spawnSync(process.execPath, [join(import.meta.dirname, "../../bin/arbor.mjs"), "run", join(root, "r.yaml"), "--continue"], { encoding: "utf8", timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  expect(r.stderr.trim()).toBe(`continue ${out}: its run has done all 3 iterations, nothing to continue (raise iterations, e.g. --set iterations=4, to go further)`);
  // Resumed further since (--resume … --set iterations=4): the count is the run's, and the advice goes beyond it.
  writeResumeState(out, { ...base, config: { ...cfg, iterations: 4 }, completedIterations: 4 });
  const further = spawnSync(process.execPath, [join(import.meta.dirname, "../../bin/arbor.mjs"), "run", join(root, "r.yaml"), "--continue"], { encoding: "utf8", timeout: 60_000 });
  expect(further.status, further.stderr).toBe(0);
  expect(further.stderr.trim()).toBe(`continue ${out}: its run has done all 4 iterations, nothing to continue (raise iterations, e.g. --set iterations=5, to go further)`);
  // Another config is not a retried job: refused as --resume refuses it.
  const changed = spawnSync(process.execPath, [join(import.meta.dirname, "../../bin/arbor.mjs"), "run", join(root, "r.yaml"), "--continue", "--set", "train.lr=0.01"], { encoding: "utf8", timeout: 60_000 });
  expect(changed.status).toBe(1);
  expect(changed.stderr.trim()).toBe(`arbor: error: --continue ${out}: the config is not the run's (train.lr: stored 0.003, given 0.01); only iterations may be raised`);
});
