// The judge reward's wiring in `arbor run`: its own gateway in front of the run's backends (here a real
// built-in engine server with a scripted executor, so the judge's answers are exact), judge calls recorded
// in judge-calls.jsonl and nowhere else.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../backends/builtin.js";
import type { Call } from "../core/types.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";
import { createRunJudge } from "./run-judge.js";

/** Scores the answer 42 with 9/10, anything else with 2/10. */
const grading = (prompt: string): string => (prompt.includes("Final answer:\n42\n") ? "SCORE: 9" : "SCORE: 2");

const REWARD = { outcome: 1, judge: 0.5, options: { judge: { model: "arbor-tiny" } } };

describe("arbor run's judge wiring", () => {
  let dir: string;
  let engine: ListeningEngineServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-run-judge-"));
    engine = await startEngineServer({ name: "e0", modelPath: "", policyVersion: 0, sequences: 2, contextSize: 4096, maxWaiting: 8, executor: new ScriptedExecutor(grading) });
  });
  afterAll(async () => {
    await engine?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("without the judge's gateway the judge reward cannot be built (what `arbor run` did before)", () => {
    expect(() => createRewardFromConfig(REWARD)).toThrow("reward.judge: needs a gateway to reach the judge model (none was given)");
    expect(createRunJudge({ reward: { outcome: 1 } as never, callsPath: join(dir, "none.jsonl") }).deps).toEqual({});
  });

  it("scores programs through a gateway of its own; judge calls go to judge-calls.jsonl only", async () => {
    const callsPath = join(dir, "out", "judge-calls.jsonl");
    const lines: string[] = [];
    const judge = createRunJudge({ reward: REWARD, callsPath, log: (l) => lines.push(l) });
    const reward = createRewardFromConfig(REWARD, judge.deps);
    await expect(reward.computeGroup([ctx(trajectory(["42"], { kind: "completed" }))])).rejects.toThrow(/judge gateway is not running/);
    await judge.start([createBuiltinBackend({ name: "e0", url: `${engine.url}/v1` })]);
    try {
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^judge {4}http:\/\/127\.0\.0\.1:\d+ \(judge reward's gateway over e0; calls in .*judge-calls\.jsonl\)$/);
      const rewards = await reward.computeGroup([ctx(trajectory(["42"], { kind: "completed" })), ctx(trajectory(["41"], { kind: "completed" }))]);
      expect(rewards).toEqual([
        { total: 1.45, components: { outcome: 1, judge: 0.9 } },
        { total: 0.1, components: { outcome: 0, judge: 0.2 } },
      ]);
      const recorded = readFileSync(callsPath, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Call);
      expect(recorded).toHaveLength(2);
      for (const c of recorded) expect(c.programId).toMatch(/^judge\/p\//);
      expect(recorded.map((c) => c.outputText).sort()).toEqual(["SCORE: 2", "SCORE: 9"]);
    } finally {
      await judge.close();
      await judge.close();
    }
    await expect(reward.computeGroup([ctx(trajectory(["42"], { kind: "completed" }))])).rejects.toThrow(/judge gateway is not running/);
  });
});
