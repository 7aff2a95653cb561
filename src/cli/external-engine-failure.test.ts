// An external engine that cannot load a new version leaves the rotation and the run goes on without it: a run
// with an in-process engine and an Arbor-managed llama-server whose binary refuses every start after the first
// (a wrapper script), trained by the reference trainer for two iterations. After the first step the llama-server
// cannot restart on the new GGUF (nor on the old one): it is retired with the reason, the gateway sends it no more
// calls, iteration 2 runs on the in-process engine at version 1, and the summary says why the engine left.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { findLlamaServer } from "../backends/llama-server-binary.js";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { runIteration, type RunSummary } from "./run.js";
import { iterationTrajectories } from "../testing/iteration-trajectories.js";

const llama = findLlamaServer();
const dir = mkdtempSync(join(tmpdir(), "arbor-ext-fail-"));
chmodSync(dir, 0o755);

describe.skipIf(!("path" in llama))(`an external engine that fails to load leaves the rotation${"path" in llama ? "" : ` (skipped: ${(llama as { missing: string }).missing})`}`, () => {
  const lines: string[] = [];
  let summary: RunSummary;

  beforeAll(async () => {
    const wrapper = join(dir, "llama-server-once.sh");
    writeFileSync(
      wrapper,
      `#!/bin/sh\nn=$(cat "${dir}/starts" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "${dir}/starts"\n` +
        `if [ "$n" -gt 1 ]; then echo "test wrapper: refusing start $n" >&2; exit 1; fi\nexec "${(llama as { path: string }).path}" "$@"\n`,
    );
    chmodSync(wrapper, 0o755);
    const cfg = parseRunConfig(
      smallRlConfig(dir, "ext-fail", {
        engines: [{ name: "e0", sequences: 4, contextSize: 1024 }],
        backends: [
          { name: "e0", type: "builtin" },
          { name: "ls0", type: "llamacpp", weightSync: { kind: "llamacpp-restart", binary: wrapper, args: ["-c", "4096", "-np", "4"], slots: "drain" } },
        ],
        env: { name: "calc", tasks: 2, seed: 7 },
        iterations: 2,
        reward: { outcome: 1, process: 1, "completion-time": 0.01, options: { "completion-time": { minOutcome: -1e9 } } },
      }),
    );
    summary = await runIteration(cfg, { progress: false, runId: "ext-fail", log: (l) => lines.push(l) });
  }, 300_000);

  it("retires the engine with the reason, logs it, and ends with the other engine on version 2", () => {
    expect(summary.policyVersion).toBe(2);
    expect(summary.engineVersions).toEqual([2]);
    expect(summary.backendVersions).toEqual([{ name: "ls0", version: 0, retired: expect.stringMatching(/ls0/) }]);
    expect(lines.some((l) => /^weights {2}out of rotation: ls0: /.test(l))).toBe(true);
  });

  it("served iteration 1 on both engines at version 0, and iteration 2 only on the engine left, at version 1", async () => {
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      const [first, second] = await Promise.all(summary.iterations.map(async (r) => (await iterationTrajectories(store, r.runId, r.iteration)).flatMap((t) => t.calls)));
      expect(new Set(first!.map((c) => c.backend))).toEqual(new Set(["e0", "ls0"]));
      expect(new Set(first!.map((c) => c.policyVersion))).toEqual(new Set([0]));
      expect(second!.length).toBeGreaterThanOrEqual(8);
      expect(new Set(second!.map((c) => c.backend))).toEqual(new Set(["e0"]));
      expect(new Set(second!.map((c) => c.policyVersion))).toEqual(new Set([1]));
      // Every program of both iterations ended and was rewarded: none was lost with the engine.
      // One run holds both iterations' programs.
      expect(summary.iterations.map((r) => r.runId)).toEqual([summary.iterations[0]!.runId, summary.iterations[0]!.runId]);
      expect(await store.stats(summary.iterations[0]!.runId)).toMatchObject({ programs: 16, unfinished: 0, rewarded: 16 });
    } finally {
      await store.close();
    }
  });
});
