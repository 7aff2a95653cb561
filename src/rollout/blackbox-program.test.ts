// Black-box programs in the synchronous rollout: the agent config and its checks, and real runs of
// examples/blackbox-coder (and of failing commands) in bwrap sandboxes through the real gateway,
// engine HTTP surface and SQLite store, with a scripted executor playing the policy.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";
import { ADMIN_TOKEN, startTestStack, type TestStack } from "../testing/test-stack.js";
import { loadRunConfig, parseRunConfig } from "../core/config.js";
import { realClock } from "../core/real-clock.js";
import { createCalcEnvironment } from "../envs/calc/calc.js";
import { HYGIENE_EVENT_TOOL, judgeProgram } from "../envs/judge-program.js";
import { createSweMiniEnvironment } from "../envs/swe-mini/swe-mini.js";
import { createRewardFromConfig } from "../reward/registry.js";
import { createBwrapProvider } from "../sandbox/bwrap.js";
import { agentSpecOf, BLACKBOX_EVENT_TOOL, blackBoxTaskText, runBlackBoxProgram, type AgentSpec, type BlackBoxAgentSpec } from "./blackbox-program.js";
import { runSyncRollout } from "../testing/sync-rollout-driver.js";

const AGENT = resolve(import.meta.dirname, "../../examples/blackbox-coder/agent.mjs");

/** Computes the question's expression with bc through run_node, then answers with what it printed. */
function play(prompt: string): string {
  onModelCall?.();
  const result = /<\|tool\|>[\s\S]*--- stdout ---\n(-?\d+)/.exec(prompt);
  if (result) return `Answer: ${result[1]}`;
  const expr = [...prompt.matchAll(/What is ([^?]+)\?/g)].pop()?.[1] ?? "1+1";
  const script = `process.stdout.write(require("child_process").execFileSync("bc", ["-q"], { input: ${JSON.stringify(`${expr}\n`)} }))`;
  return `${TOOL_CALL_OPEN}run_node ${JSON.stringify({ args: ["-e", script] })}${TOOL_CALL_CLOSE}`;
}

/** Called on every model call (the abort test stops the run from there, while the command is mid-episode). */
let onModelCall: (() => void) | undefined;
let stack: TestStack;
const dir = mkdtempSync(join(tmpdir(), "arbor-bb-program-"));
chmodSync(dir, 0o755);
let runs = 0;

beforeAll(async () => {
  stack = await startTestStack(play);
});

afterAll(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

const CODER_COMMAND = ["/usr/bin/node", "agent.mjs", "--task-file", "TASK.md", "--max-tokens", "256"];
const coder = (extra: Partial<Extract<AgentSpec, { kind: "black-box" }>> = {}): AgentSpec => ({
  kind: "black-box",
  command: CODER_COMMAND,
  files: { "agent.mjs": AGENT },
  nodePackages: ["openai"],
  taskFile: "TASK.md",
  ...extra,
});

async function rollout(agent: AgentSpec, opts: { tasks?: number; maxTurns?: number; signal?: AbortSignal } = {}) {
  const runId = `bb-${runs++}`;
  await stack.store.createRun({ id: runId, name: runId, configJson: "{}", startedAt: realClock.now() });
  const env = createCalcEnvironment();
  // Node reserves ~1 GiB of address space at start: RLIMIT_AS must leave room for it.
  const sandboxes = createBwrapProvider({ root: join(dir, runId), limits: { cpuSeconds: 20, memoryMb: 2048, wallMs: 20_000 } });
  try {
    const out = await runSyncRollout({
      runId,
      env,
      tasks: env.tasks(opts.tasks ?? 1, 4),
      groupSize: 1,
      concurrency: 2,
      store: stack.store,
      sandboxes,
      gatewayUrl: stack.gatewayUrl,
      gatewayAdminToken: ADMIN_TOKEN,
      model: "arbor-tiny",
      limits: { maxTurns: opts.maxTurns ?? 4, maxTokensPerCall: 256, maxTotalTokens: 4096 },
      temperature: 1,
      reward: (_group, ctx) => createRewardFromConfig({ outcome: 1 }).compute(ctx),
      seed: 1,
      clock: realClock,
      agent,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    expect(sandboxes.liveCount).toBe(0);
    return await Promise.all(out.results.map(async (r) => ({ ...r, trajectory: (await stack.store.getTrajectory(r.programId))! })));
  } finally {
    await sandboxes.destroyAll();
  }
}

describe("black-box programs in the rollout", () => {
  it("solve tasks with their own tools; stdout is the checked answer; the run is one arbor event", async () => {
    const results = await rollout(coder(), { tasks: 2 });
    expect(results).toHaveLength(2);
    for (const r of results) {
      expect(r.termination).toEqual({ kind: "completed" });
      expect(r.reward.total).toBe(1);
      expect(r.calls).toBe(2);
      const t = r.trajectory;
      expect(t.calls.map((c) => c.index).sort()).toEqual([0, 1]);
      // The agent got the task's user turn from TASK.md, under its own system prompt.
      const question = t.calls[0]!.messages[1]!.content;
      expect(question).toMatch(/^What is [^?]+\?$/);
      expect(t.calls[0]!.messages[0]!.content).toMatch(/^You are a careful software engineer/);
      expect(t.tools).toHaveLength(1);
      expect(t.tools[0]).toMatchObject({ tool: BLACKBOX_EVENT_TOOL, ok: true, callIndex: 1 });
      expect(JSON.parse(t.tools[0]!.input)).toEqual(CODER_COMMAND);
    }
  });

  it("end as max_turns when the proxy refuses a call past agent.maxTurns", async () => {
    const [r] = await rollout(coder(), { maxTurns: 1 });
    expect(r!.termination).toEqual({ kind: "max_turns", detail: "1 model calls" });
    expect(r!.reward.total).toBe(0);
    expect(r!.trajectory.calls).toHaveLength(1);
    expect(r!.trajectory.tools[0]).toMatchObject({ tool: BLACKBOX_EVENT_TOOL, ok: false });
  });

  it("end as aborted when the run is aborted mid-episode: the command is killed with its sandbox", async () => {
    const ac = new AbortController();
    onModelCall = () => ac.abort(new Error("received SIGINT"));
    let r;
    try {
      [r] = await rollout(coder(), { signal: ac.signal });
    } finally {
      onModelCall = undefined;
    }
    expect(r!.termination).toEqual({ kind: "aborted", detail: "run aborted: received SIGINT" });
    expect(r!.reward.total).toBe(0);
    expect(r!.trajectory.tools[0]).toMatchObject({ tool: BLACKBOX_EVENT_TOOL, ok: false });
    // Killed, not finished: the launcher never got to report the command's exit.
    expect(JSON.parse(r!.trajectory.tools[0]!.output)).toMatchObject({ exitCode: null, signal: null });
  });

  it("end as agent_error when the command fails or cannot be shipped, with the task file in place", async () => {
    const [failed] = await rollout({ kind: "black-box", command: ["/bin/sh", "-c", "cat ISSUE.txt >&2; exit 3"], taskFile: "ISSUE.txt" });
    expect(failed!.termination.kind).toBe("agent_error");
    expect(failed!.termination.detail).toMatch(/^exit 3: What is [^?]+\?$/);
    expect(failed!.calls).toBe(0);
    const rec = JSON.parse(failed!.trajectory.tools[0]!.output);
    expect(rec).toMatchObject({ exitCode: 3, files: [] });

    const [missing] = await rollout(coder({ files: { "agent.mjs": join(dir, "no-such-agent.mjs") } }));
    expect(missing!.termination.kind).toBe("agent_error");
    expect(missing!.termination.detail).toMatch(/cannot read files\.agent\.mjs from .*no-such-agent\.mjs/);
  });
});

describe("black-box programs under the environment's hygiene monitor", () => {
  // Reads the decoy grader file, then a process that left the agent's session (setsid) appends to a visible test.
  const CHEAT = ["/bin/sh", "-c", "cat /workspace/.grader/hidden.test.mjs >/dev/null; /usr/bin/setsid /bin/sh -c 'echo // >> repo/test/zz-extra.test.mjs'; echo done"];

  async function runSwe(command: string[], watched: boolean) {
    const env = createSweMiniEnvironment({ hygiene: { zeroRewardOnViolation: true, stopOnViolation: true } });
    const task = env.tasks(1, 0)[0]!;
    const programId = `hyg-${runs++}`;
    const sandboxes = createBwrapProvider({ root: join(dir, programId), limits: { cpuSeconds: 20, memoryMb: 2048, wallMs: 20_000 } });
    const sandbox = await sandboxes.create(programId);
    try {
      await env.setup(task, sandbox);
      const spec: BlackBoxAgentSpec = { kind: "black-box", command, taskFile: "ISSUE.md" };
      const limits = { maxTurns: 2, maxTokensPerCall: 64, maxTotalTokens: 256 };
      // No model call is made: the program key is never checked.
      const out = await runBlackBoxProgram({ spec, sandbox, programId, gatewayUrl: stack.gatewayUrl, apiKey: "unused", model: "m", task, limits, recordedCalls: async () => 0, ...(watched ? { env } : {}) });
      return { out, judged: await judgeProgram(env, task, sandbox, programId, out) };
    } finally {
      await sandboxes.destroyAll();
    }
  }

  it("records reads of grader files and writes to tests anywhere in the agent's process tree, zeroing the reward", async () => {
    const { out, judged } = await runSwe(CHEAT, true);
    expect(out.termination).toEqual({ kind: "completed" });
    expect(out.finalAnswer).toBe("done");
    expect(judged.zeroReward).toBe(true);
    expect(judged.termination.kind).toBe("hygiene_violation");
    expect(judged.termination.detail).toMatch(/^read of protected path \/workspace\/\.grader\/hidden\.test\.mjs by arbor:blackbox_run \(2 violation\(s\)\); was completed$/);
    expect(judged.events.map((e) => [e.tool, e.input])).toEqual([
      [HYGIENE_EVENT_TOOL, "/workspace/.grader/hidden.test.mjs"],
      [HYGIENE_EVENT_TOOL, "/workspace/repo/test/zz-extra.test.mjs"],
    ]);
    expect(JSON.parse(judged.events[1]!.output)).toMatchObject({ mode: "write", rule: "/workspace/repo/test/**", tool: BLACKBOX_EVENT_TOOL, toolInput: JSON.stringify(CHEAT) });
  });

  it("finds nothing in a clean run, and nothing is watched without the environment's hook", async () => {
    const clean = await runSwe(["/bin/sh", "-c", "cat repo/src/index.js ISSUE.md >/dev/null; node --test repo/test/ >/dev/null 2>&1; echo ok"], true);
    expect(clean.judged.events).toEqual([]);
    expect(clean.judged.termination).toEqual({ kind: "completed" });
    // Traced, the command's stderr is capped tighter still: the launcher's report must survive that too.
    const noisy = await runSwe(["/bin/sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x >&2; echo ok"], true);
    expect(noisy.out.termination).toEqual({ kind: "completed" });
    expect(noisy.judged.events).toEqual([]);
    const unwatched = await runSwe(CHEAT, false);
    expect(unwatched.judged.events).toEqual([]);
  });
});

describe("agent config", () => {
  // A black box runs its Node launcher in the sandbox: bwrap's default memoryMb (its address-space limit) is too little.
  const base = { backends: [{ name: "b", type: "openai", url: "http://127.0.0.1:1/v1" }], sandbox: { memoryMb: 4096 } };
  const agentOf = (agent: object) => parseRunConfig({ ...base, agent }).agent;

  it("defaults to the white-box tool loop and checks the black-box fields by kind", async () => {
    expect(agentSpecOf(agentOf({}))).toEqual({ kind: "white-box", toolMode: "markup" });
    expect(agentOf({ kind: "black-box", command: ["x"] }).taskFile).toBe("TASK.md");
    expect(() => agentOf({ kind: "black-box" })).toThrow(/agent\.command: required when kind is black-box/);
    expect(() => agentOf({ command: ["x"] })).toThrow(/agent\.command: applies to kind black-box only/);
    expect(() => agentOf({ kind: "black-box", command: ["x"], context: { name: "none" } })).toThrow(/agent\.context: applies to kind white-box only/);
    expect(() => agentOf({ kind: "black-box", command: [] })).toThrow(/agent\.command/);
    expect(() => agentOf({ kind: "black-box", command: ["x"], env: { "NOT A NAME": "1" } })).toThrow(/agent\.env\.NOT A NAME/);
  });

  it("resolves shipped files and refuses missing ones or paths outside the workspace", async () => {
    const spec = agentSpecOf(agentOf({ kind: "black-box", command: ["node", "a.mjs"], files: { "a.mjs": "examples/blackbox-coder/agent.mjs" }, wallMs: 5000 }));
    expect(spec).toEqual({ kind: "black-box", command: ["node", "a.mjs"], files: { "a.mjs": resolve("examples/blackbox-coder/agent.mjs") }, taskFile: "TASK.md", wallMs: 5000 });
    expect(() => agentSpecOf(agentOf({ kind: "black-box", command: ["x"], files: { "a.mjs": "no/such/file.mjs" } }))).toThrow(/agent\.files\.a\.mjs: no\/such\/file\.mjs does not exist/);
    expect(() => agentSpecOf(agentOf({ kind: "black-box", command: ["x"], taskFile: "../TASK.md" }))).toThrow(/taskFile '\.\.\/TASK\.md' must be a relative path inside the workspace/);
    expect(() => agentSpecOf(agentOf({ kind: "black-box", command: ["x"], files: { "/etc/x": AGENT } }))).toThrow(/files\.\/etc\/x/);
  });

  it("loads the shipped swe-mini black-box example config", async () => {
    const cfg = loadRunConfig(resolve(import.meta.dirname, "../../examples/blackbox-coder/swe-mini.yaml"));
    expect(cfg.env.name).toBe("swe-mini");
    expect(agentSpecOf(cfg.agent)).toMatchObject({ kind: "black-box", files: { "coder/agent.mjs": AGENT }, taskFile: "ISSUE.md", nodePackages: ["openai"] });
  });

  it("takes agent.install for black boxes only, and the cli-agent example's install and command", async () => {
    expect(() => agentOf({ install: "npm:x@1.0.0" })).toThrow(/agent\.install: applies to kind black-box only/);
    expect(() => agentOf({ installCache: "/tmp/c" })).toThrow(/agent\.installCache: applies to kind black-box only/);
    expect(agentSpecOf(agentOf({ kind: "black-box", command: ["x"], install: "npm:x@1.0.0" }))).toMatchObject({ install: "npm:x@1.0.0" });
    const cfg = loadRunConfig(resolve(import.meta.dirname, "../../examples/cli-agent/swe-mini.yaml"));
    expect(cfg.agent.install).toMatch(/^npm:@qwen-code\/qwen-code@\d+\.\d+\.\d+$/);
    expect(agentSpecOf(cfg.agent)).toMatchObject({ kind: "black-box", taskFile: "ISSUE.md", files: {} });
    expect(cfg.agent.command?.join(" ")).toContain("/opt/agent/node_modules/.bin/qwen");
  });

  it("hands over the task's user turns, not Arbor's tool-loop system prompt", async () => {
    const task = { id: "t", meta: {}, prompt: [{ role: "system" as const, content: "markup rules" }, { role: "user" as const, content: " Fix it. " }] };
    expect(blackBoxTaskText(task)).toBe("Fix it.\n");
    expect(() => blackBoxTaskText({ ...task, prompt: [task.prompt[0]!] })).toThrow(/task t has no user message/);
  });
});
