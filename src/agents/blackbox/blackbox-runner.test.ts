// The black-box runner end to end: the shipped example agent (plain `openai` client code) runs
// unchanged in a real bwrap sandbox without network, reaching only its program's gateway routes
// through the in-sandbox forwarder and the host proxy; the gateway records its calls with exact
// token ids in the real SQLite store. A scripted executor plays the policy.
import { createHash } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCalcEnvironment } from "../../envs/calc/calc.js";
import { createBwrapProvider, type BwrapProvider } from "../../sandbox/bwrap.js";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../../model/markup.js";
import { startTestStack, type TestStack } from "../../testing/test-stack.js";
import { runBlackBox, type BlackBoxOptions } from "./blackbox-runner.js";
import { LAUNCHER_STDERR_BYTES } from "./launcher-source.js";

const AGENT_PATH = join(import.meta.dirname, "../../../examples/blackbox-agent/agent.mjs");
const shipped = readFileSync(AGENT_PATH);
const sha = (b: Buffer | Uint8Array) => createHash("sha256").update(b).digest("hex");

let failNext = false;
/** Called on every model call (the abort test stops the run from there, mid-episode). */
let onModelCall: (() => void) | undefined;
/** Golden play: a calc call in native form, then "Answer: <tool output>". */
function script(p: string): string {
  onModelCall?.();
  if (failNext) throw new Error("engine down");
  const tool = /<\|tool\|>([^<]*)<\|end\|><\|assistant\|>$/.exec(p);
  if (tool) return `Answer: ${tool[1]}`;
  const q = [...p.matchAll(/What is ([^?]+)\?/g)].pop()?.[1] ?? "1+1";
  return `${TOOL_CALL_OPEN}calc ${JSON.stringify({ expression: q })}${TOOL_CALL_CLOSE}`;
}

let stack: TestStack;
let provider: BwrapProvider;
const root = mkdtempSync(join(tmpdir(), "arbor-blackbox-"));
chmodSync(root, 0o755);
let n = 0;

beforeAll(async () => {
  stack = await startTestStack(script);
  // Node reserves a lot of address space at start: the launcher and the agent each need ~1 GiB of RLIMIT_AS.
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 20, memoryMb: 2048, wallMs: 20_000 } });
});

afterAll(async () => {
  await provider?.destroyAll();
  await stack?.close();
  rmSync(root, { recursive: true, force: true });
});

async function blackBox(command: string[], extra: Partial<BlackBoxOptions> = {}) {
  const id = `bb/${n++}`;
  const apiKey = await stack.register(id);
  const sandbox = await provider.create(id);
  try {
    const out = await runBlackBox({ sandbox, programId: id, gatewayUrl: stack.gatewayUrl, apiKey, command, ...extra });
    const agentCopy = extra.files?.["agent.mjs"] !== undefined ? readFileSync(join(sandbox.hostWorkspace, "agent.mjs")) : undefined;
    // Ended through the gateway, the program's one owner (it ends the stored row once its calls are durable).
    await stack.end(id, out.termination);
    return { out, id, agentCopy, workspace: sandbox.hostWorkspace };
  } finally {
    await sandbox.destroy();
  }
}

const agentRun = (question: string, extra: Partial<BlackBoxOptions> = {}) =>
  blackBox(["/usr/bin/node", "agent.mjs", question], { files: { "agent.mjs": shipped }, nodePackages: ["openai"], ...extra });

describe("runBlackBox with the shipped example agent", () => {
  it("solves calc tasks; every call is the program's trajectory with exact token ids; the agent ran unmodified", async () => {
    const env = createCalcEnvironment();
    for (const task of env.tasks(2, 5)) {
      const before = stack.executor.outputs.length;
      const question = (task.prompt[1]?.content ?? "").replace(/^What is /, "What is ");
      const { out, id, agentCopy } = await agentRun(question);
      expect(out.stderr).toBe("");
      expect(out.termination).toEqual({ kind: "completed" });
      expect(out.exitCode).toBe(0);
      expect((await env.check(task, { finalAnswer: out.stdout })).score).toBe(1);
      const t = (await stack.store.getTrajectory(id))!;
      expect(t.calls.map((c) => c.index)).toEqual([0, 1]);
      expect(t.calls.map((c) => c.outputTokenIds)).toEqual(stack.executor.outputs.slice(before, before + 2));
      expect(t.calls.every((c) => c.backend === "scripted" && c.policyVersion === 7 && c.promptTokenIds.length > 0)).toBe(true);
      // The tool result the agent computed with bc in the sandbox went back to the model.
      expect(t.calls[1]!.messages.at(-1)).toMatchObject({ role: "tool", content: String(task.meta.answer) });
      // ...answering the tool call the model made in the first call.
      expect(t.calls[1]!.messages.at(-1)!.toolCallId).toBe(t.calls[1]!.messages.at(-2)!.toolCalls?.[0]?.id);
      expect(out.proxy).toMatchObject({ forwarded: 2, refused: 0, lastStatus: 200 });
      expect(sha(agentCopy!)).toBe(sha(shipped));
    }
    // The shipped file itself names nothing of Arbor's: it is plain OpenAI-client code.
    expect(shipped.toString("utf8")).not.toMatch(/arbor_|ARBOR_|47080|\/p\//);
  });

  it("ends as max_turns / max_tokens when the proxy's limits refuse a call, and as engine_error when the gateway fails", async () => {
    const limited = await agentRun("What is 2+3?", { maxCalls: 1 });
    expect(limited.out.termination).toEqual({ kind: "max_turns", detail: "1 model calls" });
    expect((await stack.store.getTrajectory(limited.id))!.calls).toHaveLength(1);

    // Token limit: the proxy reads each answer's usage; the call after the budget is spent is refused.
    const tokens = await agentRun("What is 2+3?", { maxTotalTokens: 5 });
    const first = (await stack.store.getTrajectory(tokens.id))!.calls;
    expect(first).toHaveLength(1);
    expect(tokens.out.proxy.generatedTokens).toBe(first[0]!.outputTokenIds.length);
    expect(tokens.out.termination).toEqual({ kind: "max_tokens", detail: `${first[0]!.outputTokenIds.length} tokens generated (limit 5)` });

    failNext = true;
    try {
      const failed = await agentRun("What is 2+3?");
      expect(failed.out.termination.kind).toBe("engine_error");
      expect(failed.out.exitCode).not.toBe(0);
    } finally {
      failNext = false;
    }
  });
});

describe("runBlackBox isolation and terminations", () => {
  it("serves Anthropic-SDK agents too: ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN reach the program's /v1/messages", async () => {
    const agent = [
      'import Anthropic from "@anthropic-ai/sdk";',
      "const client = new Anthropic({ maxRetries: 0 });",
      'const r = await client.messages.create({ model: "arbor-tiny", max_tokens: 64, messages: [{ role: "user", content: "What is 6*7?" }] });',
      "console.log(JSON.stringify({ type: r.type, text: r.content[0].text, out: r.usage.output_tokens }));",
    ].join("\n");
    const open = await startTestStack(script);
    const id = "claude/0";
    const sandbox = await provider.create(id);
    let out;
    try {
      const apiKey = await open.register(id);
      out = await runBlackBox({ sandbox, programId: id, gatewayUrl: open.gatewayUrl, apiKey, command: ["/usr/bin/node", "claude.mjs"], files: { "claude.mjs": agent }, nodePackages: ["@anthropic-ai/sdk"] });
    } finally {
      await sandbox.destroy();
    }
    const calls = (await open.store.getTrajectory(id))!.calls;
    await open.close();
    expect(out.stderr).toBe("");
    expect(out.termination).toEqual({ kind: "completed" });
    const r = JSON.parse(out.stdout);
    expect(calls).toHaveLength(1);
    expect(r).toEqual({ type: "message", text: `${TOOL_CALL_OPEN}calc {"expression":"6*7"}${TOOL_CALL_CLOSE}`, out: calls[0]!.outputTokenIds.length });
    expect(calls[0]!.messages).toEqual([{ role: "user", content: "What is 6*7?" }]);
  });

  it("reaches only its own program's routes: not the network, not the gateway directly, not other programs", async () => {
    const gw = new URL(stack.gatewayUrl);
    const probe = `
      const net = require("node:net");
      const tryConnect = (host, port) => new Promise((r) => {
        const s = net.connect(port, host); s.setTimeout(2000);
        s.on("connect", () => { s.destroy(); r("connected"); });
        s.on("error", (e) => r(e.code)); s.on("timeout", () => { s.destroy(); r("timeout"); });
      });
      const base = process.env.OPENAI_BASE_URL;
      const origin = new URL(base).origin;
      (async () => {
        const out = {
          base, anthropic: process.env.ANTHROPIC_BASE_URL, sameKey: process.env.OPENAI_API_KEY === process.env.ANTHROPIC_AUTH_TOKEN,
          keyHidden: process.env.ARBOR_PROGRAM_KEY === undefined,
          external: await tryConnect("1.1.1.1", 80),
          gatewayDirect: await tryConnect("127.0.0.1", ${gw.port}),
          models: (await fetch(base + "/models", { headers: { authorization: "Bearer " + process.env.OPENAI_API_KEY } })).status,
          admin: (await fetch(origin + "/programs")).status,
          other: (await fetch(origin + "/p/someone-else/v1/chat/completions", { method: "POST", body: "{}" })).status,
          dns: await require("node:dns").promises.lookup("example.com").then(() => "resolved", (e) => e.code),
          writeVendored: (() => { try { require("node:fs").writeFileSync("/workspace/node_modules/openai/index.mjs", "x"); return "written"; } catch (e) { return e.code; } })(),
          writeLauncher: (() => { try { require("node:fs").writeFileSync("/workspace/.arbor/launch.mjs", "x"); return "written"; } catch (e) { return e.code; } })(),
          readVendored: require("node:fs").existsSync("/workspace/node_modules/openai/package.json"),
        };
        console.log(JSON.stringify(out));
      })();
    `;
    const { out, id } = await blackBox(["/usr/bin/node", "-e", probe], { nodePackages: ["openai"] });
    expect(out.termination).toEqual({ kind: "completed" });
    const r = JSON.parse(out.stdout);
    expect(r.base).toBe(`http://127.0.0.1:47080/p/${encodeURIComponent(id)}/v1`);
    expect(r.anthropic).toBe(`http://127.0.0.1:47080/p/${encodeURIComponent(id)}`);
    expect(r.sameKey).toBe(true);
    expect(r.keyHidden).toBe(true);
    expect(r.external).toBe("ENETUNREACH");
    expect(r.gatewayDirect).toBe("ECONNREFUSED");
    expect(r.models).toBe(200);
    expect(r.admin).toBe(403);
    expect(r.other).toBe(403);
    expect(r.dns).not.toBe("resolved");
    expect(r.readVendored).toBe(true);
    // As root, Arbor runs the sandbox as another uid: the vendored package and the launcher are read-only to it.
    if (process.getuid?.() === 0) {
      expect(r.writeVendored).toBe("EACCES");
      expect(r.writeLauncher).toBe("EACCES");
    }
    expect(readFileSync(join(import.meta.dirname, "../../../node_modules/openai/index.mjs"), "utf8")).not.toBe("x");
    expect(out.proxy).toMatchObject({ forwarded: 1, refused: 2 });
  });

  it("holds every call to maxTokensPerCall whatever max_tokens the agent asks for (or refuses it, naming the field)", async () => {
    const ask = `
      const call = (body, extra = {}) => fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
        method: "POST", headers: { "content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY, ...extra },
        body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "What is 6*7?" }], ...body }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
      (async () => {
        const asked = await call({ max_tokens: 4000 });
        // (The header only the proxy may send: an agent's own is dropped.)
        const unset = await call({}, { "x-arbor-max-tokens-asked": "77" });
        const out = (r) => r.status === 200 ? [r.body.usage.completion_tokens, r.body.choices[0].finish_reason] : [r.status, r.body.error.param, r.body.error.message];
        console.log(JSON.stringify([out(asked), out(unset)]));
      })();
    `;
    const clamped = await blackBox(["/usr/bin/node", "-e", ask], { maxTokensPerCall: 3 });
    expect(clamped.out.termination).toEqual({ kind: "completed" });
    expect(JSON.parse(clamped.out.stdout)).toEqual([[3, "length"], [3, "length"]]);
    const calls = (await stack.store.getTrajectory(clamped.id))!.calls;
    expect(calls.map((c) => c.outputTokenIds.length)).toEqual([3, 3]);
    // The call says why it stopped at 3: the budget asked, lowered by the cap; the one that named none has no clamp.
    expect(calls.map((c) => c.maxTokensClamped)).toEqual([{ asked: 4000, granted: 3 }, undefined]);
    expect(clamped.out.proxy).toMatchObject({ forwarded: 2, clampedCalls: 1, cappedCalls: 1 });

    const refused = await blackBox(["/usr/bin/node", "-e", ask], { maxTokensPerCall: 3, overCap: "refuse" });
    expect(JSON.parse(refused.out.stdout)).toEqual([
      [400, "max_tokens", "max_tokens: 4000 is above this program's per-call limit of 3 tokens (agent.maxTokensPerCall)"],
      [3, "length"],
    ]);
    expect((await stack.store.getTrajectory(refused.id))!.calls).toHaveLength(1);
  });

  it("ends as aborted when the signal fires mid-run: the agent's whole process tree is killed, escapees included", async () => {
    // The agent leaves a setsid'd grandchild behind, makes one model call, then waits far past the wall limit.
    const agent = `
      const { spawn } = require("node:child_process");
      spawn("/usr/bin/setsid", ["/bin/sleep", "600"], { detached: true, stdio: "ignore" }).unref();
      fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
        method: "POST", headers: { "content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY },
        body: JSON.stringify({ model: "arbor-tiny", messages: [{ role: "user", content: "What is 1+1?" }], max_tokens: 8 }),
      }).then(() => setTimeout(() => {}, 600_000));
    `;
    const ac = new AbortController();
    onModelCall = () => ac.abort(new Error("received SIGINT"));
    const id = "bb/abort";
    const apiKey = await stack.register(id);
    const sandbox = await provider.create(id);
    let out;
    try {
      out = await runBlackBox({ sandbox, programId: id, gatewayUrl: stack.gatewayUrl, apiKey, command: ["/usr/bin/node", "-e", agent], wallMs: 15_000, signal: ac.signal });
    } finally {
      onModelCall = undefined;
      await sandbox.destroy();
    }
    expect(out.termination).toEqual({ kind: "aborted", detail: "run aborted: received SIGINT" });
    // Killed by the abort, not by the wall-clock limit; the launcher never reported an exit.
    expect(out.exec.timedOut).toBe(false);
    expect(out.exitCode).toBeNull();
    expect(provider.liveCount).toBe(0);
    await expect(runBlackBox({ sandbox, programId: id, gatewayUrl: stack.gatewayUrl, apiKey, command: ["/bin/true"], signal: ac.signal })).rejects.toThrow(
      /run aborted before the command started: received SIGINT/,
    );
  });

  it("ends as timeout past the wall-clock limit, sandbox_oom when memory runs out, agent_error on a failing command", async () => {
    const slow = await blackBox(["/bin/sleep", "30"], { wallMs: 1500 });
    expect(slow.out.termination.kind).toBe("timeout");

    const oom = await blackBox(["/usr/bin/python3", "-c", "x = bytearray(3 << 30)"]);
    expect(oom.out.termination.kind).toBe("sandbox_oom");
    expect(oom.out.termination.detail).toMatch(/MemoryError/);

    const bad = await blackBox(["/bin/sh", "-c", "echo broken >&2; exit 3"]);
    expect(bad.out.termination).toEqual({ kind: "agent_error", detail: "exit 3: broken" });
    expect(bad.out.stderr).toBe("broken\n");

    // 2 MiB of stderr is past the sandbox's output cap: the launcher keeps its report line inside it.
    const noisy = await blackBox(["/bin/sh", "-c", "head -c 2097152 /dev/zero | tr '\\0' x >&2; echo out"]);
    expect(noisy.out.termination).toEqual({ kind: "completed" });
    expect(noisy.out.stdout).toBe("out\n");
    expect(noisy.out.stderr).toBe(`${"x".repeat(LAUNCHER_STDERR_BYTES)}\n[arbor: ${2097152 - LAUNCHER_STDERR_BYTES} more bytes of stderr dropped]\n`);

    const missing = await blackBox(["/nonexistent/agent"]);
    expect(missing.out.termination.kind).toBe("agent_error");
    expect(missing.out.termination.detail).toMatch(/cannot start the command: spawn \/nonexistent\/agent ENOENT/);
  });
});
