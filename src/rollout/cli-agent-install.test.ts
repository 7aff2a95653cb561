// Issue 21's first "done when": an unmodified coding-agent CLI installed from npm (Qwen Code, via
// `agent.install: npm:...`, into a cache once) runs as a black-box program through `arbor run`
// (runIteration) on a swe-mini task: every sandbox sees the install read-only at /opt/agent, the
// CLI's calls go through the gateway and are recorded with the engine's exact token ids, the hidden
// tests give the reward, and nothing of the install lands in the workspace. A scripted executor plays
// the policy: it writes the fixed file with the CLI's own write_file tool, then answers in text. A
// second case runs examples/cli-agent/swe-mini.yaml's own command (read from the file) the same way.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";
import { resolveAgentInstall, type AgentInstall } from "../agents/blackbox/agent-install.js";
import { runIteration } from "../cli/run.js";
import { parseRunConfig, type RunConfig } from "../core/config.js";
import type { Trajectory } from "../core/types.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { parseUnifiedDiff } from "../envs/swe-mini/apply-edit.js";
import { createSweMiniEnvironment } from "../envs/swe-mini/swe-mini.js";
import { loadSweTasks, type SweTask } from "../envs/swe-mini/task-data.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { BLACKBOX_EVENT_TOOL } from "./blackbox-program.js";

const CLI = "npm:@qwen-code/qwen-code@0.15.10";
const ENV_SEED = 3;
const TOKEN_ENV = "ARBOR_CLI_AGENT_TEST_ADMIN_TOKEN";
// Shared by runs: the install is made once on this machine and reused.
const CACHE = join(tmpdir(), "arbor-agent-installs");

const task: SweTask = (() => {
  const id = createSweMiniEnvironment().tasks(1, ENV_SEED)[0]!.meta.sweTask;
  return loadSweTasks().find((t) => t.id === id)!;
})();
const fixed = parseUnifiedDiff(task.fixPatch)[0]!.path;

const fixedPath = `/workspace/repo/${fixed}`;
const call = (name: string, args: object): string => `${TOOL_CALL_OPEN}${name} ${JSON.stringify(args)}${TOOL_CALL_CLOSE}`;

/**
 * The policy's play, as Qwen Code's tools want it: read the file the fix touches (the CLI refuses to
 * overwrite an unread file), write its fixed version, then answer in text. The step is the number
 * of tool results in the prompt.
 */
function writePlay(prompt: string): string {
  const plan = [call("read_file", { file_path: fixedPath }), call("write_file", { file_path: fixedPath, content: task.files[fixed] ?? "" })];
  return plan[prompt.split("<|tool|>").length - 1] ?? `Fixed: ${task.title}`;
}

/**
 * The same fix with the tools the example's command leaves (`--bare` has no write_file): read the
 * file, then one `edit` per hunk of the golden patch (old side → new side), then answer in text.
 */
function editPlay(prompt: string): string {
  const edits = parseUnifiedDiff(task.fixPatch)[0]!.hunks.map((h) => {
    const side = (op: "-" | "+"): string => h.lines.filter((l) => l.op === " " || l.op === op).map((l) => l.text).join("\n");
    return call("edit", { file_path: fixedPath, old_string: side("-"), new_string: side("+") });
  });
  const plan = [call("read_file", { file_path: fixedPath }), ...edits];
  return plan[prompt.split("<|tool|>").length - 1] ?? `Fixed: ${task.title}`;
}

/** The play the running case uses (the cases run one after another). */
let play: (prompt: string) => string = writePlay;

/** examples/cli-agent/swe-mini.yaml's agent section, as a user runs it. */
const exampleAgent = (parseYaml(readFileSync(fileURLToPath(new URL("../../examples/cli-agent/swe-mini.yaml", import.meta.url)), "utf8")) as { agent: Record<string, unknown> & { command: string[] } }).agent;

/** Every file under `root` (relative paths), symlinks not followed. */
function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((d) => !d.isDirectory())
    .map((d) => relative(root, join(d.parentPath, d.name)));
}

/**
 * Run in the sandbox after the CLI: counts the install's files at /opt/agent, tries to write there,
 * and lists the workspace files that are copies of install files (same name and size, 1 KiB or more).
 */
const PROBE = [
  "const fs=require(\"fs\"),p=require(\"path\");",
  "const walk=(d,out)=>{for(const e of fs.readdirSync(d,{withFileTypes:true})){const f=p.join(d,e.name);if(e.isDirectory())walk(f,out);else if(e.isFile())out.push([f,fs.statSync(f).size]);}return out;};",
  "const inst=walk(\"/opt/agent\",[]),keys=new Set(inst.filter(([,s])=>s>=1024).map(([f,s])=>p.basename(f)+\":\"+s));",
  "let writeError=\"none\";try{fs.writeFileSync(\"/opt/agent/probe\",\"x\")}catch(e){writeError=e.code}",
  "const copied=walk(\"/workspace\",[]).filter(([f,s])=>keys.has(p.basename(f)+\":\"+s)).map(([f])=>f);",
  "console.error(\"PROBE \"+JSON.stringify({installFiles:inst.length,writeError,copied,home:process.env.HOME}));",
].join("");

let engine: ListeningEngineServer;
let executor: ScriptedExecutor;
let install: AgentInstall | undefined;
let skipWhy = "";
const dir = mkdtempSync(join(tmpdir(), "arbor-cli-agent-"));
chmodSync(dir, 0o755);

beforeAll(async () => {
  process.env[TOKEN_ENV] = "cli-agent-admin-token-0123456789";
  try {
    install = await resolveAgentInstall(CLI, { cacheDir: CACHE, timeoutMs: 90_000 });
  } catch (e) {
    skipWhy = `cannot install ${CLI} from the npm registry: ${(e as Error).message}`;
  }
  engine = await startEngineServer({
    name: "scripted",
    modelPath: "",
    policyVersion: 3,
    sequences: 2,
    contextSize: 131_072,
    maxWaiting: 8,
    // Qwen Code's system prompt and tool declarations take ~75k characters (one token each, mostly).
    executor: (executor = new ScriptedExecutor((prompt) => play(prompt), 131_072)),
  });
}, 120_000);

afterAll(async () => {
  await engine?.close();
  delete process.env[TOKEN_ENV];
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `cfg`'s one program through `arbor run`'s iteration; its trajectory and the executor's count before it. */
async function runOneProgram(cfg: RunConfig): Promise<{ t: Trajectory; before: number }> {
  const before = executor.outputs.length;
  const summary = await runIteration(cfg, { progress: false });
  const store = new SqliteTrajectoryStore(summary.storePath);
  const [t, ...more] = await store.listTrajectories(summary.runId);
  await store.close();
  expect(more).toHaveLength(0);
  return { t: t!, before };
}

/** The run config both cases share around their agent: one swe-mini task on the scripted engine. */
function cliRunConfig(name: string, agent: Record<string, unknown>, runDir: string): RunConfig {
  return parseRunConfig({
    name,
    model: { path: join(dir, "unused.gguf") },
    backends: [{ name: "scripted", type: "builtin", url: `${engine.url}/v1` }],
    gateway: { auth: { adminTokenEnv: TOKEN_ENV } },
    env: { name: "swe-mini", tasks: 1, seed: ENV_SEED },
    rollout: { groupSize: 1, concurrency: 1 },
    agent,
    // Node reserves address space generously: RLIMIT_AS must leave room for the CLI's bundle.
    sandbox: { root: join(dir, runDir, "sb"), cpuSeconds: 60, memoryMb: 8192, wallMs: 90_000, workspaceMb: 512 },
    output: { dir: join(dir, runDir, "out") },
  });
}

describe("an unmodified coding-agent CLI from npm under arbor run", () => {
  it("runs from the read-only install, is recorded token-exact, is rewarded by the hidden tests, copies nothing", async (ctx) => {
    if (!install) ctx.skip(skipWhy);
    play = writePlay;
    const cfg = cliRunConfig(
      "cli-agent",
      {
        kind: "black-box",
        install: CLI,
        installCache: CACHE,
        // The CLI unmodified (its own bin and flags, the task text as its prompt); after it, the probe
        // looks at the sandbox as the CLI left it.
        command: ["/bin/sh", "-c", `/opt/agent/node_modules/.bin/qwen --auth-type openai --yolo -p "$(cat ISSUE.md)"; code=$?; /usr/bin/node -e '${PROBE}' >&2; exit $code`],
        taskFile: "ISSUE.md",
        wallMs: 90_000,
        maxTurns: 8,
        maxTokensPerCall: 2048,
        maxTotalTokens: 16_384,
      },
      "run1",
    );
    const { t, before } = await runOneProgram(cfg);

    // The CLI ran to its end and fixed the bug: the hidden tests reward it.
    expect(t.program.termination).toMatchObject({ kind: "completed" });
    expect(t.reward?.total).toBe(1);
    const run = t.tools.find((x) => x.tool === BLACKBOX_EVENT_TOOL)!;
    const rec = JSON.parse(run.output);
    expect(rec).toMatchObject({ exitCode: 0, files: [], install: CLI, proxy: { refused: 0 } });

    // Read, write, answer: three calls, each recorded with exactly the ids the engine used and produced.
    const calls = [...t.calls].sort((a, b) => a.index - b.index);
    expect(calls).toHaveLength(3);
    expect(calls.map((c) => c.outputTokenIds)).toEqual(executor.outputs.slice(before));
    expect(calls.map((c) => c.promptTokenIds)).toEqual(executor.requests.slice(before).map((r) => [...r.promptTokenIds]));
    for (const c of calls) {
      expect(c.outputTokenIds.length).toBeGreaterThan(0);
      expect(c.policyVersion).toBe(3);
    }
    expect(calls[2]!.outputText).toBe(`Fixed: ${task.title}`);
    // The CLI's own system prompt and its HOME in the workspace: it really is the CLI that talked.
    expect(calls[0]!.messages[0]!.content).toContain("/workspace/.home/.qwen");

    // The sandbox saw the install read-only, and nothing of it was copied into the workspace.
    const line = rec.stderrTail.split("\n").find((l: string) => l.startsWith("PROBE "));
    expect(line, rec.stderrTail).toBeDefined();
    const probe = JSON.parse(line.slice(6));
    expect(probe.installFiles).toBeGreaterThan(100);
    expect(probe.writeError).toBe("EROFS");
    expect(probe.copied).toEqual([]);
    expect(probe.home).toBe("/workspace/.home");
    expect(filesUnder(install!.hostPath)).not.toContain("probe");
  }, 150_000);
  it("runs examples/cli-agent/swe-mini.yaml's own command: a ~5 KB request, streamed answers counted, reward 1", async (ctx) => {
    if (!install) ctx.skip(skipWhy);
    play = editPlay;
    const cfg = cliRunConfig(
      "cli-agent-example",
      {
        // The example's agent exactly (install, command, task file, turn limits), on this machine's
        // cache; the scripted policy's edit answers are longer than the tiny policy's clamp, and the
        // test bounds its own wall time.
        ...exampleAgent,
        installCache: CACHE,
        wallMs: 90_000,
        maxTokensPerCall: 2048,
        maxTotalTokens: 16_384,
      },
      "run2",
    );
    expect(cfg.agent.command).toEqual(exampleAgent.command);
    const { t, before } = await runOneProgram(cfg);

    expect(t.program.termination).toMatchObject({ kind: "completed" });
    expect(t.reward?.total).toBe(1);
    const rec = JSON.parse(t.tools.find((x) => x.tool === BLACKBOX_EVENT_TOOL)!.output);
    expect(rec).toMatchObject({ exitCode: 0, files: [], install: CLI, proxy: { refused: 0, uncountedCalls: 0 } });

    // Read, one edit per hunk, answer: each call recorded with exactly the engine's ids.
    const hunks = parseUnifiedDiff(task.fixPatch)[0]!.hunks.length;
    const calls = [...t.calls].sort((a, b) => a.index - b.index);
    expect(calls).toHaveLength(2 + hunks);
    expect(calls.map((c) => c.outputTokenIds)).toEqual(executor.outputs.slice(before));
    expect(calls.map((c) => c.promptTokenIds)).toEqual(executor.requests.slice(before).map((r) => [...r.promptTokenIds]));
    expect(calls.at(-1)!.outputText).toBe(`Fixed: ${task.title}`);
    // The CLI streams its calls (with include_usage): the proxy counted every generated token.
    expect(rec.proxy.generatedTokens).toBe(calls.reduce((n, c) => n + c.outputTokenIds.length, 0));

    // The flags took: the example's one-paragraph system prompt, no shell and no write_file declared,
    // and a first prompt of a few thousand byte-level tokens (the CLI's defaults make ~60k).
    const system = /--system-prompt "([^"]*)"/.exec(exampleAgent.command.join(" "))![1]!;
    expect(calls[0]!.messages[0]).toMatchObject({ role: "system", content: system });
    const firstPrompt = executor.prompts[before]!;
    expect(firstPrompt).toContain("read_file");
    expect(firstPrompt).not.toContain("run_shell_command");
    expect(firstPrompt).not.toContain("write_file");
    expect(calls[0]!.promptTokenIds.length).toBeLessThan(8000);
  }, 150_000);
});
