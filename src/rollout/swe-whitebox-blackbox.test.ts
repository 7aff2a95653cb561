// Issue 5's "done when": one swe-mini task run by `arbor run` (runIteration) twice — once with
// Arbor's white-box tool agent, once with examples/blackbox-coder as a black box — through the
// real gateway (program keys on, token path), the built-in engine's HTTP surface, bwrap sandboxes
// and the SQLite store. A scripted executor plays the policy so the answers are deterministic and
// really call tools (list, read, write, run the tests, then a summary) — in the tool-loop markup
// for the white box, as native tool calls for the black box. Both trajectories must hold exactly
// the token ids and logprobs the engine produced, both outcomes are checked by the hidden tests,
// and the agent that ran in the sandbox is byte-identical to the shipped file.
import { createHash } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";
import type { BackendReply } from "../backends/backend.js";
import { runIteration, type RunSummary } from "../cli/run.js";
import { parseRunConfig } from "../core/config.js";
import type { Trajectory } from "../core/types.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { SETUP_EVENT_TOOL } from "../envs/judge-program.js";
import { parseUnifiedDiff } from "../envs/swe-mini/apply-edit.js";
import { buggyFiles, createSweMiniEnvironment } from "../envs/swe-mini/swe-mini.js";
import { loadSweTasks, type SweTask } from "../envs/swe-mini/task-data.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { BLACKBOX_EVENT_TOOL } from "./blackbox-program.js";

const AGENT = resolve(import.meta.dirname, "../../examples/blackbox-coder/agent.mjs");
const shipped = readFileSync(AGENT);
const sha256 = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");
const ENV_SEED = 3;
const TOKEN_ENV = "ARBOR_SWE_BB_TEST_ADMIN_TOKEN";

/**
 * The policy's play on any swe-mini task: list the files, read each file the fix touches, write
 * its fixed version, run the visible tests, then summarize. The step is the number of tool
 * results in the prompt; the engine's tool declaration ("You can call these tools") marks a
 * native-tools request, whose arguments are JSON.
 */
function play(prompt: string): string {
  const pkg = /Issue in ([\w-]+):/.exec(prompt)?.[1];
  const t = loadSweTasks().find((x) => x.package === pkg);
  if (!t) return "I cannot tell which package the issue is about.";
  const native = prompt.includes("You can call these tools");
  const call = (name: string, markup: string, args: object, nativeName = name): string =>
    `${TOOL_CALL_OPEN}${native ? nativeName : name} ${native ? JSON.stringify(args) : markup}${TOOL_CALL_CLOSE}`;
  const paths = parseUnifiedDiff(t.fixPatch).map((p) => p.path);
  const plan = [
    call("list_files", ".", { path: "." }),
    ...paths.map((p) => call("read_file", p, { path: p })),
    ...paths.map((p) => call("write_file", `${p}\n${t.files[p] ?? ""}`, { path: p, content: t.files[p] ?? "" })),
    call("run", "node --test test/", { args: ["--test", "test/"] }, "run_node"),
  ];
  const step = prompt.split("<|tool|>").length - 1;
  return plan[step] ?? `Fixed: ${t.title}`;
}

let engine: ListeningEngineServer;
const dir = mkdtempSync(join(tmpdir(), "arbor-swe-wb-bb-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);
const task: SweTask = (() => {
  const id = createSweMiniEnvironment().tasks(1, ENV_SEED)[0]!.meta.sweTask;
  return loadSweTasks().find((t) => t.id === id)!;
})();

beforeAll(async () => {
  process.env[TOKEN_ENV] = "swe-bb-admin-token-0123456789";
  engine = await startEngineServer({
    name: "scripted",
    modelPath: "",
    policyVersion: 5,
    sequences: 2,
    contextSize: 16_384,
    maxWaiting: 8,
    executor: new ScriptedExecutor(play, 16_384),
  });
});

afterAll(async () => {
  await engine?.close();
  delete process.env[TOKEN_ENV];
  rmSync(dir, { recursive: true, force: true });
});

interface Played {
  summary: RunSummary;
  trajectory: Trajectory;
  /** What the engine answered, as the gateway received it (token path), in order. */
  replies: BackendReply[];
}

/** One `arbor run` iteration of the task with the given agent section; the run's single trajectory. */
async function arborRun(name: string, agent: Record<string, unknown>): Promise<Played> {
  const replies: BackendReply[] = [];
  const cfg = parseRunConfig({
    name,
    // No engine is started in-process: the path is never opened.
    model: { path: join(dir, "unused.gguf") },
    backends: [{ name: "scripted", type: "builtin", url: `${engine.url}/v1` }],
    gateway: { auth: { adminTokenEnv: TOKEN_ENV } },
    env: { name: "swe-mini", tasks: 1, seed: ENV_SEED },
    rollout: { groupSize: 1, concurrency: 1 },
    agent: { maxTurns: 8, maxTokensPerCall: 2048, maxTotalTokens: 8192, ...agent },
    // Node reserves ~1 GiB of address space at start: RLIMIT_AS must leave room for it.
    sandbox: { root: join(dir, `sb-${name}`), cpuSeconds: 20, memoryMb: 4096, wallMs: 30_000 },
    output: { dir: join(dir, name) },
  });
  const summary = await runIteration(cfg, { progress: false, onBackendReply: (_b, r) => replies.push(r) });
  const store = new SqliteTrajectoryStore(summary.storePath);
  try {
    const [trajectory, ...more] = await store.listTrajectories(summary.runId);
    expect(more).toHaveLength(0);
    return { summary, trajectory: trajectory!, replies };
  } finally {
    await store.close();
  }
}

/** Every recorded call holds exactly the prompt ids, output ids and logprobs the engine answered with. */
function expectExactTokens(p: Played): void {
  const calls = [...p.trajectory.calls].sort((a, b) => a.index - b.index);
  expect(calls.length).toBeGreaterThan(0);
  expect(p.replies).toHaveLength(calls.length);
  calls.forEach((c, i) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json = p.replies[i]!.json as any;
    expect(c.promptTokenIds).toEqual(json.prompt_token_ids);
    expect(c.outputTokenIds).toEqual(json.choices[0].token_ids);
    expect(c.logprobs).toEqual(json.choices[0].logprobs.content.map((x: { logprob: number }) => x.logprob));
    expect(c.outputTokenIds.length).toBeGreaterThan(0);
    expect(c.policyVersion).toBe(5);
    expect(c.backend).toBe("scripted");
  });
}

describe("swe-mini: white-box and black-box agents under arbor run", () => {
  it("both fix the same task through the gateway; both trajectories hold the engine's exact tokens; the black box ran unmodified", async () => {
    const path = parseUnifiedDiff(task.fixPatch)[0]!.path;
    const buggy = buggyFiles(task)[path]!;
    expect(buggy).not.toBe(task.files[path]);

    const white = await arborRun("white", {});
    const black = await arborRun("black", {
      kind: "black-box",
      command: ["/usr/bin/node", "coder/agent.mjs", "--cwd", "repo", "--task-file", "ISSUE.md"],
      files: { "coder/agent.mjs": AGENT },
      nodePackages: ["openai"],
      taskFile: "ISSUE.md",
      wallMs: 60_000,
    });

    for (const p of [white, black]) {
      expect(p.trajectory.program.taskId).toBe(`swe-mini-${task.id}`);
      expect(p.trajectory.program.termination).toMatchObject({ kind: "completed" });
      // Completed programs are rewarded from the hidden tests' check (the outcome reward refuses an unchecked one).
      expect(p.trajectory.reward?.total).toBe(1);
      expect(p.summary.stats.meanReward).toBe(1);
      // list, read, write, run, summary.
      expect(p.trajectory.calls).toHaveLength(5);
      expectExactTokens(p);
      const last = p.trajectory.calls.find((c) => c.index === 4)!;
      expect(last.outputText).toBe(`Fixed: ${task.title}`);
      // The tools really ran in the sandbox: the model saw the buggy file it read.
      expect(last.messages.some((m) => m.role === "tool" && m.content.includes(buggy))).toBe(true);
    }

    // White box: Arbor ran the tools, so they are trajectory events (after the set-up event).
    expect(white.trajectory.tools.map((t) => t.tool)).toEqual([SETUP_EVENT_TOOL, "list_files", "read_file", "write_file", "run"]);
    // Black box: native tool calls the agent ran itself; Arbor records the run as one event.
    const blackCalls = [...black.trajectory.calls].sort((a, b) => a.index - b.index);
    expect(blackCalls[0]!.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(blackCalls[0]!.messages[1]!.content).toBe(`Issue in ${task.package}: ${task.title}\n\n${task.issue}`);
    expect(blackCalls[4]!.messages.filter((m) => m.role === "tool")).toHaveLength(4);
    const run = black.trajectory.tools.find((t) => t.tool === BLACKBOX_EVENT_TOOL)!;
    expect(run).toMatchObject({ ok: true, callIndex: 4 });
    const rec = JSON.parse(run.output);
    expect(rec).toMatchObject({ termination: { kind: "completed" }, exitCode: 0, proxy: { refused: 0 } });
    expect(rec.files).toEqual([{ path: "coder/agent.mjs", sha256: sha256(shipped), bytes: shipped.length }]);
    // The shipped agent is plain OpenAI-client code that names nothing of Arbor's.
    expect(shipped.toString("utf8")).not.toMatch(/arbor|47080|\/p\//i);
  }, 120_000);
});
