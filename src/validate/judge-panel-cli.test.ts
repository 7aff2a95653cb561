// `arbor validate` with a judge panel: three judge models, each a real built-in engine behind its
// own real gateway (with credentials), scripted for deterministic votes. Two review the arithmetic
// (does the expected answer match the question?), one approves everything; the majority decides.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evalExpr } from "../envs/calc/expr.js";
import { openStore } from "../store/registry.js";
import { startScriptedJudgeGateway, type ScriptedJudgeGateway } from "../testing/scripted-judge-gateway.js";
import { arbor, repoRoot } from "../testing/validate-cli.js";
import type { ValidationReport } from "./validate-tasks.js";

/** Consistent when the checker's expected answer is the value of the question's expression. */
function reviewArithmetic(prompt: string): string {
  const question = /What is ([^?]+)\?/.exec(prompt);
  const answer = /"answer":(-?\d+)/.exec(prompt);
  if (!question || !answer) return "I cannot tell.";
  return `VERDICT: ${String(evalExpr(question[1] as string)) === answer[1] ? "CONSISTENT" : "INCONSISTENT"}`;
}

let judges: ScriptedJudgeGateway[] = [];

beforeAll(async () => {
  judges = [
    await startScriptedJudgeGateway("reviewer-a", reviewArithmetic),
    await startScriptedJudgeGateway("reviewer-b", reviewArithmetic),
    await startScriptedJudgeGateway("yes-man", () => "Looks fine. VERDICT: CONSISTENT"),
  ];
}, 60_000);

afterAll(async () => {
  for (const j of judges) await j.close();
});

describe("arbor validate with a judge panel", () => {
  it("drops the task whose instruction and test disagree by majority vote, and the one whose golden fails", async () => {
    const out = mkdtempSync(join(tmpdir(), "arbor-validate-panel-"));
    const [a, b, yes] = judges as [ScriptedJudgeGateway, ScriptedJudgeGateway, ScriptedJudgeGateway];
    const before = judges.map((j) => j.calls.length);
    const r = await arbor(
      [
        "validate", join(repoRoot, "examples/flawed-dataset/calc-tasks.jsonl"), "--out", out, "--strict",
        "--judge-gateway", a.url, "--judge", "reviewer-a", "--judge", `reviewer-b@${b.url}`, "--judge", `yes-man@${yes.url}`,
        "--judge-admin-token-env", "TEST_JUDGE_TOKEN",
      ],
      { TEST_JUDGE_TOKEN: a.adminToken },
    );
    expect(r.stderr).toBe("");
    // --strict: tasks were dropped.
    expect(r.code).toBe(2);
    const rows = r.stdout.split("\n");
    expect(rows[0]).toMatch(/^task\s+golden\s+no-op\s+judges\s+result$/);
    expect(rows.find((l) => l.startsWith("calc-product "))).toMatch(/pass \(1\)\s+fails \(0\)\s+3\/3 consistent\s+kept$/);
    expect(rows.find((l) => l.startsWith("calc-wrong-answer "))).toMatch(/pass \(1\)\s+fails \(0\)\s+1\/3 consistent\s+dropped: judge-rejects$/);
    expect(rows.find((l) => l.startsWith("calc-bad-golden "))).toMatch(/FAIL \(0\)\s+fails \(0\)\s+3\/3 consistent\s+dropped: golden-fails$/);
    expect(r.stdout).toContain("2/4 tasks kept; dropped: 1 golden fails, 0 no-op passes, 1 judge rejects");

    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as ValidationReport;
    expect(report.judges).toEqual(["reviewer-a", "reviewer-b", "yes-man"]);
    const wrong = report.tasks.find((t) => t.id === "calc-wrong-answer");
    expect(wrong?.judge).toEqual({
      ok: false,
      approvals: 1,
      needed: 2,
      votes: [
        { model: "reviewer-a", verdict: "inconsistent" },
        { model: "reviewer-b", verdict: "inconsistent" },
        { model: "yes-man", verdict: "consistent" },
      ],
    });
    // Each judge was asked once per task, through its own gateway.
    expect(judges.map((j, i) => j.calls.length - (before[i] as number))).toEqual([4, 4, 4]);
    const filtered = readFileSync(join(out, "calc-tasks.filtered.jsonl"), "utf8").trim().split("\n").map((l) => (JSON.parse(l) as { id: string }).id);
    expect(filtered).toEqual(["calc-product", "calc-grouped"]);
  }, 120_000);

  it("a judge that cannot be reached leaves the tasks its vote could have kept undecided, not rejected, and fails the command", async () => {
    const out = mkdtempSync(join(tmpdir(), "arbor-validate-unreachable-"));
    const [a] = judges as [ScriptedJudgeGateway];
    // Nothing listens on port 9 of this machine: every request to the second judge fails.
    const r = await arbor(
      ["validate", join(repoRoot, "examples/flawed-dataset/calc-tasks.jsonl"), "--out", out, "--judge-attempts", "1", "--judge-gateway", a.url, "--judge", "reviewer-a", "--judge", "gone@http://127.0.0.1:9", "--judge-admin-token-env", "TEST_JUDGE_TOKEN"],
      { TEST_JUDGE_TOKEN: a.adminToken },
    );
    expect(r.code).toBe(1);
    // Two votes needed: reviewer-a's approval and the unreachable one's missing vote leave calc-product undecided;
    // calc-wrong-answer is rejected by reviewer-a whatever the other would have said.
    expect(r.stdout).toMatch(/calc-product\s+pass \(1\)\s+fails \(0\)\s+1\/2 consistent, 1 unreachable\s+dropped: judge-unreachable/);
    expect(r.stdout).toMatch(/calc-wrong-answer\s+pass \(1\)\s+fails \(0\)\s+0\/2 consistent, 1 unreachable\s+dropped: judge-rejects/);
    expect(r.stdout).toContain("0/4 tasks kept; dropped: 1 golden fails, 0 no-op passes, 1 judge rejects, 3 undecided (judges unreachable)");
    expect(r.stderr).toMatch(/^validate: 3 task\(s\) undecided and left out: their judges could not be reached \(judge model 'gone' could not be reached \(VERDICT\) for task '[a-z-]+': 1 attempt\(s\) failed; last: request failed: /);
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as ValidationReport;
    expect(report.tasks.find((t) => t.id === "calc-product")?.judge).toMatchObject({ ok: false, approvals: 1, needed: 2, undecided: true });
  }, 120_000);

  it("through a deployment's gateway (store-backed, no default run): the judges' programs go in a run of their own, ended after", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-validate-store-"));
    const store = await openStore({ kind: "sqlite", path: join(dir, "store.sqlite") });
    const judge = await startScriptedJudgeGateway("reviewer-s", reviewArithmetic, { store });
    try {
      const r = await arbor(
        ["validate", join(repoRoot, "examples/flawed-dataset/calc-tasks.jsonl"), "--out", join(dir, "out"), "--judge-gateway", judge.url, "--judge", "reviewer-s", "--judge-admin-token-env", "TEST_JUDGE_TOKEN"],
        { TEST_JUDGE_TOKEN: judge.adminToken },
      );
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/calc-wrong-answer\s+pass \(1\)\s+fails \(0\)\s+0\/1 consistent\s+dropped: judge-rejects/);
      expect(r.stdout).toMatch(/calc-product\s+pass \(1\)\s+fails \(0\)\s+1\/1 consistent\s+kept/);
      const runs = await store.listRuns();
      expect(runs).toHaveLength(1);
      expect(runs[0]!.name).toBe(`validate ${join(repoRoot, "examples/flawed-dataset/calc-tasks.jsonl")}`);
      expect(runs[0]!.id).toMatch(/^validate-[0-9a-f]{8}$/);
      expect(runs[0]!.endedAt).toBeGreaterThan(0);
      // One judge program per task, each with its recorded call.
      const programs = await store.listTrajectories(runs[0]!.id);
      expect(programs).toHaveLength(4);
      expect(programs.every((t) => t.calls.length === 1 && t.program.state === "terminated")).toBe(true);
      // Each judge program is stored under the task it judged.
      expect(programs.map((t) => t.program.taskId).sort()).toEqual(["calc-bad-golden", "calc-grouped", "calc-product", "calc-wrong-answer"]);
    } finally {
      await judge.close();
      await store.close();
    }
  }, 120_000);
});
