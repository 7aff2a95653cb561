// The config `arbor run --resume` continues with: the stored one (with --set), or the file given again; any
// difference but more iterations is refused naming it, as are a run that is done and a moved folder.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
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
