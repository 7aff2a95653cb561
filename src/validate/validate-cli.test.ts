// `arbor validate` as a process on the shipped flawed dataset: the ground-truth and no-op checks run
// in real bwrap sandboxes (hidden tests under node) and drop exactly the flawed tasks.
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskFile } from "../envs/task-file.js";
import { isModuleSpec, loadDataset } from "./dataset.js";
import { arbor, repoRoot } from "../testing/validate-cli.js";
import type { ValidationReport } from "./validate-tasks.js";

const DATASET = join(repoRoot, "examples/flawed-dataset");

describe("arbor validate on the flawed sample dataset", () => {
  it("tells a module path from a dataset path", () => {
    expect(["./my-env.ts", "envs.mjs#shop", "/a/b.js", "x.mts"].map(isModuleSpec)).toEqual([true, true, true, true]);
    expect(["tasks.jsonl", "calc", "examples/flawed-dataset", "x.ts#"].map(isModuleSpec)).toEqual([false, false, false, false]);
  });

  it("drops exactly the tasks whose golden fails and those that pass with no change", async () => {
    const out = mkdtempSync(join(tmpdir(), "arbor-validate-cli-"));
    const r = await arbor(["validate", DATASET, "--out", out, "--concurrency", "3"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const rows = r.stdout.split("\n");
    const row = (id: string): string => rows.find((l) => l.startsWith(`swe-mini-${id} `)) ?? "";
    for (const good of ["luhn-from-right", "roman-subtractive", "slugify-trim"]) expect(row(good)).toMatch(/pass \(1\)\s+fails \(0\)\s+kept$/);
    for (const bad of ["range-count-down", "truncate-limit"]) expect(row(bad)).toMatch(/FAIL \(0\)\s+fails \(0\)\s+dropped: golden-fails$/);
    for (const bad of ["slugify-accents", "wrap-greedy"]) expect(row(bad)).toMatch(/pass \(1\)\s+PASSES \(1\)\s+dropped: no-op-passes$/);
    expect(r.stdout).toContain("3/7 tasks kept; dropped: 2 golden fails, 2 no-op passes, 0 judge rejects");

    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as ValidationReport;
    expect(report.env).toBe("swe-mini");
    expect(report.summary).toEqual({ total: 7, kept: 3, dropped: 4, byReason: { "golden-fails": 2, "no-op-passes": 2, "judge-rejects": 0, "judge-unreachable": 0 } });
    const dropped = Object.fromEntries(report.tasks.filter((t) => !t.kept).map((t) => [t.id, t.reasons]));
    expect(dropped).toEqual({
      "swe-mini-range-count-down": ["golden-fails"],
      "swe-mini-truncate-limit": ["golden-fails"],
      "swe-mini-slugify-accents": ["no-op-passes"],
      "swe-mini-wrap-greedy": ["no-op-passes"],
    });
    expect(report.tasks.find((t) => t.id === "swe-mini-truncate-limit")?.groundTruth.detail).toMatch(/hidden tests passed; failing: never longer than max/);

    // The filtered dataset is the good task folders, in the format the command reads.
    const filtered = join(out, "filtered-tasks");
    expect(readdirSync(filtered).sort()).toEqual(["luhn-from-right", "roman-subtractive", "slugify-trim"]);
    expect(readFileSync(join(filtered, "slugify-trim/fix.patch"), "utf8")).toBe(readFileSync(join(DATASET, "tasks/slugify-trim/fix.patch"), "utf8"));
    expect(loadDataset(filtered).tasks.map((t) => t.task.id)).toEqual(["swe-mini-luhn-from-right", "swe-mini-roman-subtractive", "swe-mini-slugify-trim"]);
  }, 120_000);

  it("validates a user's environment module (examples/custom-env/my-env.ts); the filtered tasks are a task file a run reads", async () => {
    const out = mkdtempSync(join(tmpdir(), "arbor-validate-module-"));
    const r = await arbor(["validate", join(repoRoot, "examples/custom-env/my-env.ts"), "--tasks", "3", "--out", out]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("3/3 tasks kept");
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as ValidationReport;
    expect(report.env).toBe("shop");
    expect(report.tasks.map((t) => [t.id, t.kept])).toEqual([
      ["shop-1-0", true],
      ["shop-1-1", true],
      ["shop-1-2", true],
    ]);
    const tasks = await loadTaskFile(join(out, "shop.filtered.jsonl"), "shop");
    expect(tasks.map((t) => t.id)).toEqual(["shop-1-0", "shop-1-1", "shop-1-2"]);
    expect(tasks[0]?.meta).toMatchObject({ expression: expect.any(String), answer: expect.any(Number) });
  }, 120_000);

  it("refuses a --pass-score that is not a number, or outside (0, 1], in one line naming it", async () => {
    const notNumber = await arbor(["validate", "calc", "--pass-score", "abc"]);
    expect(notNumber.code).toBe(1);
    expect(notNumber.stderr.trim()).toBe("error: option '--pass-score <x>' argument 'abc' is invalid. not a number: abc");
    for (const score of ["0", "2"]) {
      const r = await arbor(["validate", "calc", "--tasks", "1", "--out", mkdtempSync(join(tmpdir(), "arbor-validate-score-")), "--pass-score", score]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`arbor: error: validate: passScore must be in (0, 1], got ${score}`);
    }
  }, 60_000);

  it("fails with one clear line for a target that does not exist", async () => {
    const r = await arbor(["validate", "/nonexistent/dataset"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe("arbor: error: validate: '/nonexistent/dataset' is neither an environment (calc, swe-mini, search-qa) nor an existing file or folder");
  }, 60_000);
});
