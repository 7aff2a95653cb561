// Final evaluation of a swe-mini program: the hidden tests are copied into the sandbox only now,
// to a fresh randomly named directory the agent never saw, and run with plain node. A pass needs
// every hidden test to be reported passing: a program that exits early reports fewer passes.
// `node --test` runs the file in a child process and reports from the parent, so the agent's code
// (imported by the tests) cannot write the summary itself; we read the last summary it printed.
import { randomBytes } from "node:crypto";
import type { Sandbox } from "../../sandbox/sandbox.js";
import type { CheckResult } from "../env.js";
import type { SweTask } from "./task-data.js";
import { REPO_DIR } from "./tools.js";

/** Wall-clock limit of one hidden-test run. */
export const HIDDEN_TEST_WALL_MS = 30_000;

/** Counts from the last summary of node's TAP output (a forged earlier one does not count). */
export function tapSummary(tap: string): { pass: number; fail: number } | undefined {
  const pass = [...tap.matchAll(/^# pass (\d+)$/gm)].pop();
  const fail = [...tap.matchAll(/^# fail (\d+)$/gm)].pop();
  return pass && fail ? { pass: Number(pass[1]), fail: Number(fail[1]) } : undefined;
}

/** Copy the hidden tests in, run them, remove them again and score the result. */
export async function runHiddenTests(task: SweTask, sandbox: Sandbox, env: Record<string, string> = {}): Promise<CheckResult> {
  const dir = `.arbor-eval-${randomBytes(8).toString("hex")}`;
  const file = `${dir}/hidden.test.mjs`;
  await sandbox.writeFile(file, task.hiddenTest.replaceAll("@PKG@", REPO_DIR));
  let removed = false;
  try {
    // The same exec removes the tests again.
    const r = await sandbox.exec(
      ["/bin/sh", "-c", '/usr/bin/node --test --test-reporter=tap "$1"; rc=$?; rm -rf "$2" && exit $rc', "hidden", `/workspace/${file}`, `/workspace/${dir}`],
      { cwd: REPO_DIR, env, wallMs: HIDDEN_TEST_WALL_MS },
    );
    removed = !r.timedOut && r.signal === null;
    const s = tapSummary(r.stdout);
    const failing = [...r.stdout.matchAll(/^\s*not ok \d+ - (.*)$/gm)].map((m) => m[1]).filter((n) => !n?.endsWith(".mjs"));
    const counts = s ? `${s.pass}/${task.hiddenTests} hidden tests passed` : "no test summary";
    if (r.timedOut) return { score: 0, detail: `hidden tests timed out after ${HIDDEN_TEST_WALL_MS} ms` };
    if (r.exitCode === 0 && s && s.fail === 0 && s.pass === task.hiddenTests) return { score: 1, detail: counts };
    const why = failing.length > 0 ? `; failing: ${failing.slice(0, 3).join(", ")}` : r.exitCode === 0 ? "" : `; exit ${r.exitCode ?? r.signal}${r.limit ? ` (the sandbox's ${r.limit} limit)` : ""}`;
    return { score: 0, detail: `${counts}${why}` };
  } finally {
    if (!removed) await sandbox.exec(["/bin/rm", "-rf", "--", `/workspace/${dir}`]);
  }
}
