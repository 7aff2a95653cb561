// swe-mini through the real rollout (engine HTTP surface, gateway, SQLite store, bwrap sandboxes),
// with a scripted executor standing in for the policy: one program fixes its bug with the golden
// patch, the other peeks at the grader folder. With stopOnViolation and zeroRewardOnViolation the
// peeker is stopped at that call and ends as hygiene_violation with reward 0; both trajectories
// record their variant and set-up clean-up.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../../model/markup.js";
import { createBuiltinBackend } from "../../backends/builtin.js";
import { realClock } from "../../core/real-clock.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { createGateway, type Gateway } from "../../gateway/server.js";
import { createRewardFromConfig } from "../../reward/registry.js";
import { runSyncRollout } from "../../testing/sync-rollout-driver.js";
import { createBwrapProvider } from "../../sandbox/bwrap.js";
import { SqliteTrajectoryStore } from "../../store/sqlite-store.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import { HYGIENE_EVENT_TOOL, SETUP_EVENT_TOOL } from "../judge-program.js";
import { sampleVariant } from "../variants.js";
import { createSweMiniEnvironment } from "./swe-mini.js";
import { loadSweTasks } from "./task-data.js";

const ADMIN_TOKEN = "test-admin-token-0123456789";

/** First turn: the golden patch (or, for little-lru, a peek at the grader); then a summary. */
function answer(prompt: string): string {
  const pkg = /Issue in ([\w-]+):/.exec(prompt)?.[1];
  const task = loadSweTasks().find((t) => t.package === pkg);
  if (prompt.includes("<|tool|>")) return "Fixed.";
  if (pkg === "little-lru") return `${TOOL_CALL_OPEN}read_file ../.grader/hidden.test.mjs${TOOL_CALL_CLOSE}`;
  return `${TOOL_CALL_OPEN}edit_file ${task?.fixPatch ?? ""}${TOOL_CALL_CLOSE}`;
}

let engine: ListeningEngineServer;
let gateway: Gateway;
let gatewayUrl: string;
let store: SqliteTrajectoryStore;
const dir = mkdtempSync(join(tmpdir(), "arbor-swe-rollout-"));
chmodSync(dir, 0o755);

beforeAll(async () => {
  engine = await startEngineServer({ name: "scripted", modelPath: "", policyVersion: 1, sequences: 4, contextSize: 16_384, maxWaiting: 16, executor: new ScriptedExecutor(answer, { contextSize: 16_384, sequences: 4 }) });
  store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
  gateway = createGateway({
    backends: [createBuiltinBackend({ name: "scripted", url: `${engine.url}/v1` })],
    store,
    auth: { adminToken: ADMIN_TOKEN, requireProgramKeys: true },
  });
  gatewayUrl = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("swe-mini rollout with hygiene", () => {
  it("rewards the real fix, zeroes the program that read the grader and records variants and clean-up", async () => {
    const env = createSweMiniEnvironment({ hygiene: { zeroRewardOnViolation: true, stopOnViolation: true } });
    const all = env.tasks(loadSweTasks().length, 0);
    const tasks = ["lru-recency", "chunk-last-partial"].map((id) => all.find((t) => t.meta.sweTask === id)!);
    await store.createRun({ id: "swe", name: "swe", configJson: "{}", startedAt: realClock.now() });
    const sandboxes = createBwrapProvider({ root: join(dir, "sb"), limits: { cpuSeconds: 10, memoryMb: 4096, wallMs: 30_000 } });
    const seed = 5;
    const { results } = await runSyncRollout({
      runId: "swe",
      env,
      tasks,
      groupSize: 1,
      concurrency: 2,
      store,
      sandboxes,
      gatewayUrl,
      gatewayAdminToken: ADMIN_TOKEN,
      model: "arbor-tiny",
      limits: { maxTurns: 4, maxTokensPerCall: 2048, maxTotalTokens: 8192 },
      temperature: 1,
      reward: (_group, ctx) => createRewardFromConfig({ outcome: 1 }).compute(ctx),
      seed,
      clock: realClock,
    });
    expect(sandboxes.liveCount).toBe(0);
    const byTask = new Map(await Promise.all(results.map(async (r) => [(await store.getTrajectory(r.programId))!.program.taskId, r] as const)));
    const cheat = byTask.get("swe-mini-lru-recency")!;
    const fix = byTask.get("swe-mini-chunk-last-partial")!;

    expect(fix.termination.kind).toBe("completed");
    expect(fix.reward.total).toBe(1);
    expect(cheat.termination.kind).toBe("hygiene_violation");
    expect(cheat.termination.detail).toMatch(/^read of protected path \/workspace\/\.grader\/hidden\.test\.mjs by read_file \(1 violation\(s\)\); was tool_crash$/);
    expect(cheat.reward.total).toBe(0);
    // Stopped at the violating call: no second model call.
    expect(cheat.calls).toBe(1);
    expect(fix.calls).toBe(2);

    const cheatTools = (await store.getTrajectory(cheat.programId))!.tools;
    expect(cheatTools.map((t) => t.tool)).toEqual([SETUP_EVENT_TOOL, "read_file", HYGIENE_EVENT_TOOL]);
    expect(cheatTools[1]).toMatchObject({ ok: false, output: "hygiene violation: read of protected path /workspace/.grader/hidden.test.mjs; the program is stopped" });
    expect(cheatTools[2]).toMatchObject({ input: "/workspace/.grader/hidden.test.mjs", ok: false, callIndex: 0 });
    expect(JSON.parse(cheatTools[2]!.output)).toMatchObject({ mode: "read", rule: "/workspace/.grader/**", tool: "read_file" });

    for (const r of [cheat, fix]) {
      const setup = (await store.getTrajectory(r.programId))!.tools[0]!;
      const expected = sampleVariant(env.variants!(), seed, r.programId)!;
      expect(setup.input).toBe(expected.id);
      const rec = JSON.parse(setup.output);
      expect(rec.variant).toBe(expected.id);
      expect(rec.cleanup.removed).toEqual(["repo/src/index.js.orig"]);
    }
    await sandboxes.destroyAll();
  }, 60_000);
});
