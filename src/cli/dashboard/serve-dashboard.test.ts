// `arbor serve dashboard --store <path>` as a user runs it: read-only over a stored run (testing/inspect-store.ts)
// and its metrics.jsonl, the URL printed, the API answering, a clean stop on SIGTERM; a missing store is one line.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeInspectStore } from "../../testing/inspect-store.js";
import type { Overview } from "./dashboard-types.js";

const root = join(import.meta.dirname, "../../..");
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-serve-dashboard-"));
  await writeInspectStore(join(dir, "store.sqlite"));
  writeFileSync(join(dir, "metrics.jsonl"), `${JSON.stringify({ kind: "iteration", index: 1, runId: "run-1", policyVersion: 0, meanReward: 0.5, meanOutputTokens: 9, loss: 0.1 })}\n`);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("arbor serve dashboard", () => {
  it("serves a stored run's programs and curves read-only, prints its URL, stops on SIGTERM", async () => {
    const child = spawn(process.execPath, [join(root, "bin/arbor.mjs"), "serve", "dashboard", "--store", dir, "--port", "0"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    let stderr = "";
    const url = await new Promise<string>((done, fail) => {
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        const m = /^dashboard (http:\/\/\S+?)\/ /m.exec(stderr);
        if (m?.[1]) done(m[1]);
      });
      void exited.then((code) => fail(new Error(`exited ${code}: ${stderr}`)));
    });
    try {
      expect(stderr).toContain(`curves from ${dir}/metrics.jsonl`);
      const o = (await (await fetch(`${url}/api/overview`)).json()) as Overview;
      expect(o).toMatchObject({ mode: "store", programsTotal: 4, engines: [], gateway: null, sandboxPool: null, programCounts: { terminated: { none: 4 } } });
      expect(o.runs.map((r) => r.id)).toEqual(["run-1", "run-2"]);
      expect(o.curves).toMatchObject([{ index: 1, meanReward: 0.5, loss: 0.1 }]);
      const t = (await (await fetch(`${url}/api/programs/g1-p0`)).json()) as { turns: { outputText: string }[] };
      expect(t.turns[1]?.outputText).toBe("The answer is 42.<|end|>");
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  }, 120_000);

  it("a missing store is a one-line error", () => {
    const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "serve", "dashboard", "--store", join(dir, "nope.sqlite")], { encoding: "utf8", timeout: 120_000 });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(`arbor: error: store: no such file: ${join(dir, "nope.sqlite")}`);
  }, 120_000);
});
