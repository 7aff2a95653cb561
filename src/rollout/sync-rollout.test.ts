// The rollout through the real engine HTTP surface, gateway, SQLite store and bwrap sandboxes, with a
// scripted executor standing in for the policy: the untrained tiny model never calls tools, and these
// tests need programs that do (to check tool rewards, crashes and sandbox clean-up).
import { chmodSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";
import { createBuiltinBackend } from "../backends/builtin.js";
import { realClock } from "../core/real-clock.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { createCalcEnvironment } from "../envs/calc/calc.js";
import type { Environment, Tool } from "../envs/env.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { createBwrapProvider } from "../sandbox/bwrap.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";
import { runSyncRollout } from "../testing/sync-rollout-driver.js";

const ADMIN_TOKEN = "test-admin-token-0123456789";

/** Answers like the golden trajectory: a calc tool call first, then `Answer: <tool output>`. */
function golden(prompt: string): string {
  const tool = /<\|tool\|>([^<]*)<\|end\|><\|assistant\|>$/.exec(prompt);
  const question = [...prompt.matchAll(/What is ([^?]+)\?/g)].pop();
  return tool ? `Answer: ${tool[1]}` : `${TOOL_CALL_OPEN}calc ${question?.[1] ?? "1+1"}${TOOL_CALL_CLOSE}`;
}

let engine: ListeningEngineServer;
let gateway: Gateway;
let gatewayUrl: string;
let store: SqliteTrajectoryStore;
const dir = mkdtempSync(join(tmpdir(), "arbor-rollout-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);

beforeAll(async () => {
  engine = await startEngineServer({ name: "golden", modelPath: "", policyVersion: 3, sequences: 4, contextSize: 4096, maxWaiting: 16, executor: new ScriptedExecutor(golden, { sequences: 4 }) });
  store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
  gateway = createGateway({
    backends: [createBuiltinBackend({ name: "golden", url: `${engine.url}/v1` })],
    store,
    auth: { adminToken: ADMIN_TOKEN, requireProgramKeys: true },
  });
  gatewayUrl = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  await store?.close();
});

async function rollout(runId: string, env: Environment, sandboxRoot: string) {
  await store.createRun({ id: runId, name: runId, configJson: "{}", startedAt: realClock.now() });
  const sandboxes = createBwrapProvider({ root: sandboxRoot, limits: { cpuSeconds: 2, memoryMb: 128, wallMs: 5000 } });
  try {
    const out = await runSyncRollout({
      runId,
      env,
      tasks: env.tasks(2, 11),
      groupSize: 2,
      concurrency: 4,
      store,
      sandboxes,
      gatewayUrl,
      gatewayAdminToken: ADMIN_TOKEN,
      model: "arbor-tiny",
      limits: { maxTurns: 3, maxTokensPerCall: 64, maxTotalTokens: 256 },
      temperature: 1,
      reward: (_group, ctx) => createRewardFromConfig({ outcome: 1 }).compute(ctx),
      seed: 1,
      clock: realClock,
    });
    // Looked at before destroyAll below: each program must have removed its own sandbox.
    return { ...out, leftoverWorkspaces: readdirSync(sandboxRoot), liveSandboxes: sandboxes.liveCount };
  } finally {
    await sandboxes.destroyAll();
  }
}

describe("runSyncRollout", () => {
  it("runs tool-calling programs in sandboxes, records every call and rewards correct answers", async () => {
    const root = join(dir, "sb-ok");
    const { groups, results, leftoverWorkspaces, liveSandboxes } = await rollout("ok", createCalcEnvironment(), root);
    expect(groups).toHaveLength(2);
    expect(results).toHaveLength(4);
    for (const r of results) {
      expect(r.termination.kind).toBe("completed");
      expect(r.reward.total).toBe(1);
      const t = (await store.getTrajectory(r.programId))!;
      expect(t.calls.map((c) => c.index)).toEqual([0, 1]);
      expect(t.calls.every((c) => c.policyVersion === 3 && c.backend === "golden")).toBe(true);
      expect(t.tools).toHaveLength(1);
      expect(t.tools[0]!.ok).toBe(true);
      // The tool really ran: its output is the task's answer, computed by bc inside the sandbox.
      expect(t.calls[1]!.outputText).toBe(`Answer: ${t.tools[0]!.output}`);
    }
    expect(leftoverWorkspaces).toEqual([]);
    expect(liveSandboxes).toBe(0);
    // The gateway requires program keys: the calls above went through only with each program's own key.
    const res = await fetch(`${gatewayUrl}/programs/${encodeURIComponent(results[0]!.programId)}/trace`);
    expect(res.status).toBe(401);
  });

  it("ends a program whose tool crashes as tool_crash and still removes its sandbox", async () => {
    const calc = createCalcEnvironment();
    const seen: string[] = [];
    const crashing: Tool = {
      name: "calc",
      description: "crashes",
      async run(_input, sandbox) {
        seen.push(sandbox.hostWorkspace);
        expect(readFileSync(join(sandbox.hostWorkspace, "task.json"), "utf8")).toContain("question");
        const r = await sandbox.exec(["/bin/sh", "-c", "sleep 30 & kill -SEGV $$"]);
        return { ok: false, crashed: true, output: `calc crashed: signal ${r.signal}` };
      },
    };
    const env: Environment = { ...calc, tools: () => [crashing] };
    const root = join(dir, "sb-crash");
    const { results, leftoverWorkspaces, liveSandboxes } = await rollout("crash", env, root);
    expect(results).toHaveLength(4);
    for (const r of results) {
      expect(r.termination).toEqual({ kind: "tool_crash", detail: "calc: calc crashed: signal SIGSEGV" });
      expect(r.reward.total).toBe(0);
      expect((await store.getTrajectory(r.programId))!.program.termination?.kind).toBe("tool_crash");
    }
    expect(seen).toHaveLength(4);
    expect(leftoverWorkspaces).toEqual([]);
    expect(liveSandboxes).toBe(0);
    // No process of any sandbox survives (the backgrounded `sleep 30` included).
    const leftovers = readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return seen.some((ws) => readFileSync(`/proc/${p}/cmdline`, "utf8").includes(ws));
        } catch {
          return false;
        }
      });
    expect(leftovers).toEqual([]);
  });

  it("records an outcome even when a sandbox fails to tear down or the gateway is unreachable", async () => {
    const root = join(dir, "sb-teardown");
    const real = createBwrapProvider({ root, limits: { cpuSeconds: 2, memoryMb: 128, wallMs: 5000 } });
    const flaky = {
      name: "flaky",
      async create(id: string) {
        const sb = await real.create(id);
        return Object.assign(Object.create(sb) as typeof sb, {
          destroy: async () => {
            await sb.destroy();
            throw new Error("disk on fire");
          },
        });
      },
      destroyAll: () => real.destroyAll(),
    };
    const base = { env: createCalcEnvironment(), groupSize: 1, concurrency: 2, store, sandboxes: flaky, model: "arbor-tiny" };
    const common = {
      ...base,
      limits: { maxTurns: 3, maxTokensPerCall: 64, maxTotalTokens: 256 },
      temperature: 1,
      reward: (_group: unknown, ctx: Parameters<ReturnType<typeof createRewardFromConfig>["compute"]>[0]) => createRewardFromConfig({ outcome: 1 }).compute(ctx),
      seed: 1,
      clock: realClock,
    };
    await store.createRun({ id: "teardown", name: "teardown", configJson: "{}", startedAt: realClock.now() });
    const torn = await runSyncRollout({ ...common, runId: "teardown", tasks: base.env.tasks(1, 3), gatewayUrl, gatewayAdminToken: ADMIN_TOKEN });
    expect(torn.results[0]!.termination.kind).toBe("completed");
    expect(torn.results[0]!.termination.detail).toBe("sandbox teardown failed: disk on fire");

    await store.createRun({ id: "nogw", name: "nogw", configJson: "{}", startedAt: realClock.now() });
    // The gateway owns the programs: without it none can be created, and the rollout says so.
    // Its pauses between tries take no time here: the tries and the error are what is checked.
    const instant = { ...realClock, now: () => realClock.now(), setTimer: realClock.setTimer.bind(realClock), sleep: async () => {} };
    await expect(runSyncRollout({ ...common, clock: instant, runId: "nogw", tasks: base.env.tasks(1, 3), gatewayUrl: "http://127.0.0.1:9" })).rejects.toThrow(
      // (after riding out about 25 s of outage in production: a gateway restarting comes back within that)
      /^gateway unreachable creating program nogw\/g0\/s0: gateway creating program nogw\/g0\/s0: failed 8 times, last: fetch failed/,
    );
    expect(await store.stats("nogw")).toMatchObject({ programs: 0, unfinished: 0 });
    await real.destroyAll();
  });
});
