// defineAgent through the real engine surface, gateway (program keys) and SQLite store, with real
// bwrap sandboxes where tools run commands; a scripted executor decides the answers.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "../core/zod.js";
import { VirtualClock } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";
import type { ChatMessage } from "../core/types.js";
import { createBwrapProvider, type BwrapProvider } from "../sandbox/bwrap.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { AgentStop } from "./agent-stop.js";
import { defineTool, type AgentTool } from "./agent-tool.js";
import { createContextPolicy } from "./context/registry.js";
import { SUMMARY_PREFIX } from "./context/summarize.js";
import { defineAgent, type AgentDefinition, type AgentOutcome } from "./define-agent.js";
import { TOOL_CALL_CLOSE as CLOSE, TOOL_CALL_OPEN as OPEN } from "../model/markup.js";
import { recordAgentEvents } from "./record-outcome.js";
import { execToolResult } from "./sandbox-outcome.js";
import { startTestStack, type TestStack } from "../testing/test-stack.js";

/** The task word of the first user message ("TASK:<word>") picks the script's behaviour. */
function taskOf(prompt: string): string {
  return /<\|user\|>TASK:([\w-]+)/.exec(prompt)?.[1] ?? "";
}
function toolOutputs(prompt: string): string[] {
  return [...prompt.matchAll(/<\|tool\|>([^<]*)<\|end\|>/g)].map((m) => m[1] as string);
}
const prompts: string[] = [];

function script(p: string): string {
  prompts.push(p);
  // The summarizer's own call carries no task: it is recognised by its instructions.
  if (p.includes("Summarize the conversation below")) return "the echo tool answered four times";
  const outs = toolOutputs(p);
  switch (taskOf(p)) {
    case "parallel":
      return outs.length === 0 ? `${OPEN}wait {"id":"a"}${CLOSE}${OPEN}wait {"id":"b"}${CLOSE}` : `Answer: ${outs.join(",")}`;
    case "bad-input":
      return outs.length === 0 ? `${OPEN}wait {"id":5}${CLOSE}${OPEN}nope x${CLOSE}` : `Answer: ${outs.join(" | ")}`;
    case "loop":
      return `${OPEN}echo ${"x".repeat(12)}${CLOSE}`;
    case "crash":
    case "oom":
    case "hygiene":
    case "slow":
      return outs.length === 0 ? `${OPEN}${taskOf(p)} go${CLOSE}` : "Answer: done";
    case "fail":
      throw new Error("the scripted policy failed");
    case "discard":
      if (p.includes("CONTEXT RESET")) return "Answer: reset seen";
      return `${OPEN}echo ${"y".repeat(40)}${CLOSE}`;
    case "summarize":
      if (p.includes(SUMMARY_PREFIX.trim())) return "Answer: summarized";
      return `${OPEN}echo ${"z".repeat(40)}${CLOSE}`;
    case "think":
      return p.includes("Check again.") ? "<think>second plan</think>Answer: 2" : "<think>secret plan</think>Answer: 1";
    default:
      return "Answer: 0";
  }
}

let stack: TestStack;
let provider: BwrapProvider;
let sandbox: Sandbox;
const root = mkdtempSync(join(tmpdir(), "arbor-define-agent-"));
chmodSync(root, 0o755);

beforeAll(async () => {
  stack = await startTestStack(script);
  // 256 MiB of address space: enough for python3 to start, too little for what the oom tool asks.
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 10_000 } });
  sandbox = await provider.create("agents");
});

afterAll(async () => {
  await provider?.destroyAll();
  await stack?.close();
  rmSync(root, { recursive: true, force: true });
});

const echo = defineTool({ name: "echo", description: "echo the text", input: z.string(), run: async (s) => s.slice(0, 8) });
const limits = { maxTurns: 6, maxTokensPerCall: 128, maxTotalTokens: 2000 };
let n = 0;

async function play(
  task: string,
  def: Partial<AgentDefinition> & { tools: AgentTool[] },
  extra: { clock?: VirtualClock; signal?: AbortSignal; user?: string; checkHygiene?: () => string | undefined } = {},
): Promise<{ out: AgentOutcome; id: string; client: OpenAI }> {
  const id = `p${n++}-${task}`;
  const client = await stack.program(id);
  const agent = defineAgent({ name: task, toolMode: "markup", limits, ...def });
  const messages: ChatMessage[] = [
    { role: "system", content: "You are a test agent." },
    { role: "user", content: extra.user ?? `TASK:${task}` },
  ];
  const out = await agent.run({
    client,
    model: "arbor-tiny",
    programId: id,
    messages,
    sandbox,
    clock: extra.clock ?? realClock,
    seed: 3,
    ...(extra.signal ? { signal: extra.signal } : {}),
    ...(extra.checkHygiene ? { checkHygiene: extra.checkHygiene } : {}),
  });
  await recordAgentEvents(stack.store, out);
  await stack.end(id, out.termination);
  return { out, id, client };
}

describe("defineAgent: native tool calls", () => {
  it("runs the calls of one answer concurrently and feeds the results back in call order", async () => {
    const arrived: string[] = [];
    let release!: () => void;
    const both = new Promise<void>((r) => (release = r));
    const wait = defineTool({
      name: "wait",
      description: "wait for the other call",
      input: z.object({ id: z.string() }),
      async run({ id }) {
        arrived.push(id);
        if (arrived.length === 2) release();
        // Neither call can finish before both have started: sequential execution would hang here.
        await Promise.race([both, new Promise((_, rej) => setTimeout(() => rej(new Error("calls did not overlap")), 5000))]);
        // b finishes first; the results must still come back as a, b.
        if (id === "a") await new Promise((r) => setTimeout(r, 30));
        return `done ${id}`;
      },
    });
    const before = stack.executor.outputs.length;
    const { out, id } = await play("parallel", { tools: [wait], toolMode: "native" });
    expect(out.termination).toEqual({ kind: "completed" });
    expect(out.finalAnswer).toBe("Answer: done a,done b");
    expect(out.tools.map((t) => [t.tool, t.input, t.output, t.ok, t.callIndex])).toEqual([
      ["wait", '{"id":"a"}', "done a", true, 0],
      ["wait", '{"id":"b"}', "done b", true, 0],
    ]);
    // The request declared the tool (the engine rendered it for the policy) and the answer came back as tool_calls.
    expect(prompts.some((p) => p.includes("You can call these tools:\n- wait: wait for the other call"))).toBe(true);
    expect(out.messages[2]?.toolCalls?.map((c) => c.name)).toEqual(["wait", "wait"]);
    const t = (await stack.store.getTrajectory(id))!;
    expect(t.calls.map((c) => c.outputTokenIds)).toEqual(stack.executor.outputs.slice(before, before + 2));
    expect(t.calls.every((c) => c.policyVersion === 7 && c.logprobs.length === c.outputTokenIds.length)).toBe(true);
    expect(t.tools).toHaveLength(2);
  });

  it("answers invalid arguments and unknown tools to the model without ending the episode", async () => {
    const wait = defineTool({ name: "wait", description: "w", input: z.object({ id: z.string() }), run: async ({ id }) => id });
    const { out } = await play("bad-input", { tools: [wait] });
    expect(out.termination.kind).toBe("completed");
    expect(out.tools.map((t) => t.ok)).toEqual([false, false]);
    expect(out.tools[0]?.output).toMatch(/^invalid arguments for wait: id: /);
    expect(out.tools[1]?.output).toBe("unknown tool 'nope' (known: wait)");
    expect(out.finalAnswer).toContain("invalid arguments for wait");
  });
});

describe("defineAgent: every termination is reachable and recorded", () => {
  const kindOf = async (id: string) => (await stack.store.getTrajectory(id))?.program.termination?.kind;

  it("completed, max_turns and max_tokens", async () => {
    const done = await play("plain", { tools: [echo] });
    expect(done.out.termination).toEqual({ kind: "completed" });
    expect(done.out.finalAnswer).toBe("Answer: 0");

    const turns = await play("loop", { tools: [echo], limits: { ...limits, maxTurns: 3 } });
    expect(turns.out.termination).toEqual({ kind: "max_turns", detail: "3 turns" });
    expect(turns.out.calls).toBe(3);
    expect((await stack.store.getTrajectory(turns.id))?.calls).toHaveLength(3);

    const tokens = await play("loop", { tools: [echo], limits: { ...limits, maxTotalTokens: 40 } });
    expect(tokens.out.termination.kind).toBe("max_tokens");
    expect(tokens.out.generatedTokens).toBe(40);
    expect(await kindOf(tokens.id)).toBe("max_tokens");
  });

  it("timeout: the wall-time limit of the injected clock stops the episode mid-tool", async () => {
    const clock = new VirtualClock(1000);
    const slow = defineTool({
      name: "slow",
      description: "takes 10 s",
      input: z.string(),
      async run(_s, ctx) {
        clock.advance(10_000);
        expect(ctx.signal.aborted).toBe(true);
        return "late";
      },
    });
    const { out, id } = await play("slow", { tools: [slow], limits: { ...limits, maxWallMs: 5000 } }, { clock });
    expect(out.termination).toEqual({ kind: "timeout", detail: "wall time limit of 5000 ms reached" });
    expect(out.calls).toBe(1);
    expect(await kindOf(id)).toBe("timeout");
  });

  it("tool_crash, sandbox_oom (a real allocation refused in the sandbox) and hygiene_violation", async () => {
    const crash = defineTool({ name: "crash", description: "c", input: z.string(), run: async () => ({ output: "segfault", ok: false, crashed: true }) });
    const c = await play("crash", { tools: [crash] });
    expect(c.out.termination).toEqual({ kind: "tool_crash", detail: "crash: segfault" });

    const oom = defineTool({
      name: "oom",
      description: "allocates 1 GiB",
      input: z.string(),
      run: async (_s, ctx) => execToolResult("python3", await ctx.sandbox.exec(["/usr/bin/python3", "-c", "x = bytearray(1 << 30)"])),
    });
    const o = await play("oom", { tools: [oom] });
    expect(o.out.termination.kind).toBe("sandbox_oom");
    expect(o.out.termination.detail).toMatch(/^oom: python3 ran out of memory: .*MemoryError/s);
    expect(await kindOf(o.id)).toBe("sandbox_oom");

    const hygiene = defineTool({
      name: "hygiene",
      description: "h",
      input: z.string(),
      run: async () => {
        throw new AgentStop("hygiene_violation", "read /grader/tests.js");
      },
    });
    const h = await play("hygiene", { tools: [hygiene] });
    expect(h.out.termination).toEqual({ kind: "hygiene_violation", detail: "hygiene: read /grader/tests.js" });
    expect(h.out.tools[0]).toMatchObject({ tool: "hygiene", ok: false, output: "read /grader/tests.js" });
    expect(await kindOf(h.id)).toBe("hygiene_violation");

    // Or reported by a monitor (the environment's hygiene record) after the tool round.
    const read = defineTool({ name: "crash", description: "reads a file", input: z.string(), run: async () => "contents" });
    const m = await play("crash", { tools: [read] }, { checkHygiene: () => "read of /grader/hidden.test.js" });
    expect(m.out.termination).toEqual({ kind: "hygiene_violation", detail: "read of /grader/hidden.test.js" });
    expect(m.out.tools).toHaveLength(1);
  });

  it("engine_error, context_overflow, aborted and agent_error", async () => {
    const e = await play("fail", { tools: [echo] });
    expect(e.out.termination.kind).toBe("engine_error");
    expect(e.out.calls).toBe(0);

    const big = await play("plain", { tools: [echo] }, { user: `TASK:plain ${"w ".repeat(3000)}` });
    expect(big.out.termination.kind).toBe("context_overflow");
    expect(big.out.termination.detail).toMatch(/over the context of 4096 tokens/);

    const ac = new AbortController();
    ac.abort("run stopped");
    const a = await play("plain", { tools: [echo] }, { signal: ac.signal });
    expect(a.out.termination).toEqual({ kind: "aborted", detail: "run stopped" });

    const bug = await play("plain", {
      tools: [echo],
      onAnswer: () => {
        throw new Error("hook bug");
      },
    });
    expect(bug.out.termination).toEqual({ kind: "agent_error", detail: "hook bug" });
  });
});

describe("defineAgent: context management is an action recorded in the trajectory", () => {
  it("discard-all resets to the task messages past 80% of the window; the event names the call that first saw it", async () => {
    const context = createContextPolicy({ name: "discard-all", windowTokens: 400, note: "CONTEXT RESET: start again." });
    const { out, id } = await play("discard", { tools: [echo], context, limits: { ...limits, maxTurns: 12 } });
    expect(out.termination.kind).toBe("completed");
    expect(out.finalAnswer).toBe("Answer: reset seen");
    expect(out.contextEvents).toHaveLength(1);
    const ev = out.contextEvents[0]!;
    expect(ev).toMatchObject({ programId: id, policy: "discard-all", action: "discard", messagesAfter: 3, detail: "CONTEXT RESET: start again." });
    expect(ev.tokensBefore).toBeGreaterThan(320);
    const t = (await stack.store.getTrajectory(id))!;
    expect(t.contextEvents).toEqual([ev]);
    // The call before the event saw the grown context (less its own answer and the tool result); the call at the event sees task + note only.
    expect(t.calls[ev.callIndex - 1]!.messages.length).toBe(ev.messagesBefore - 2);
    expect(t.calls[ev.callIndex]!.messages.map((m) => m.content)).toEqual(["You are a test agent.", "TASK:discard", "CONTEXT RESET: start again."]);
    // Before: exact from the engine's usage plus the estimated tool result; after: the first call's exact prompt + the note.
    const exactBefore = t.calls[ev.callIndex - 1]!.promptTokenIds.length + t.calls[ev.callIndex - 1]!.outputTokenIds.length;
    expect(ev.tokensBefore).toBeGreaterThan(exactBefore);
    expect(ev.tokensAfter).toBeGreaterThan(t.calls[0]!.promptTokenIds.length);
    expect(Math.abs(ev.tokensAfter - t.calls[ev.callIndex]!.promptTokenIds.length)).toBeLessThanOrEqual(10);
  });

  it("summarize asks the model for the summary through the program's endpoint, and that call is in the trajectory", async () => {
    const context = createContextPolicy({ name: "summarize", windowTokens: 400, keepLast: 2 });
    const { out, id } = await play("summarize", { tools: [echo], context, limits: { ...limits, maxTurns: 12 } });
    expect(out.termination.kind).toBe("completed");
    expect(out.finalAnswer).toBe("Answer: summarized");
    const ev = out.contextEvents[0]!;
    expect(ev).toMatchObject({ policy: "summarize", action: "summarize", detail: "the echo tool answered four times" });
    expect(ev.tokensAfter).toBeLessThan(ev.tokensBefore);
    const t = (await stack.store.getTrajectory(id))!;
    expect(t.calls).toHaveLength(out.calls);
    expect(out.calls).toBe(out.turns + 1);
    expect(t.calls[ev.callIndex - 1]!.messages[0]!.content).toMatch(/^Summarize the conversation below/);
    const seen = t.calls[ev.callIndex]!.messages;
    expect(seen.slice(0, 2).map((m) => m.content)).toEqual(["You are a test agent.", "TASK:summarize"]);
    expect(seen[2]).toEqual({ role: "user", content: `${SUMMARY_PREFIX}the echo tool answered four times` });
    // The kept tail starts with an assistant call, never with an orphaned tool result.
    expect(seen[3]?.role).toBe("assistant");
  });

  it("clear-thinking drops earlier reasoning when a new user message arrives", async () => {
    let asked = 0;
    const { out, id } = await play("think", {
      tools: [echo],
      context: createContextPolicy({ name: "clear-thinking" }),
      onAnswer: () => (asked++ === 0 ? "Check again." : undefined),
    });
    expect(out.termination.kind).toBe("completed");
    expect(out.finalAnswer).toBe("<think>second plan</think>Answer: 2");
    expect(out.contextEvents).toEqual([
      expect.objectContaining({ callIndex: 1, policy: "clear-thinking", action: "clear-thinking", messagesBefore: 4, messagesAfter: 4 }),
    ]);
    const second = (await stack.store.getTrajectory(id))!.calls[1]!.messages;
    expect(second.map((m) => m.content)).toEqual(["You are a test agent.", "TASK:think", "Answer: 1", "Check again."]);
  });
});

describe("defineAgent: declaration errors", () => {
  it("refuses duplicate tools, bad limits and bad modes", () => {
    expect(() => defineAgent({ name: "x", tools: [echo, echo], toolMode: "markup", limits })).toThrow(/two tools named 'echo'/);
    expect(() => defineAgent({ name: "x", tools: [], toolMode: "markup", limits: { ...limits, maxTurns: 0 } })).toThrow(/limits.maxTurns/);
    expect(() => defineAgent({ name: "x", tools: [], toolMode: "json" as never, limits })).toThrow(/toolMode/);
    expect(() => defineTool({ name: "bad name", description: "", input: z.string(), run: async () => "" })).toThrow(/invalid tool name/);
  });
});
