import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseToolCalls } from "../../model/markup.js";
import { createBwrapProvider, type BwrapProvider } from "../../sandbox/bwrap.js";
import type { ExecOptions, ExecResult, Sandbox } from "../../sandbox/sandbox.js";
import { checkAnswer, createCalcEnvironment } from "./calc.js";
import { evalExpr } from "./expr.js";
import { calcTasks } from "./tasks.js";
import { CALC_MAX_INPUT } from "./tool.js";

const env = createCalcEnvironment();
const tool = env.tools()[0]!;
let root: string;
let provider: BwrapProvider;

/** A real sandbox that records what it was asked to run. */
function spy(inner: Sandbox): Sandbox & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    programId: inner.programId,
    hostWorkspace: inner.hostWorkspace,
    calls,
    exec: (argv: string[], opts?: ExecOptions) => {
      calls.push(argv);
      return inner.exec(argv, opts);
    },
    writeFile: (p, d) => inner.writeFile(p, d),
    destroy: () => inner.destroy(),
  };
}

/** A sandbox whose every exec returns `result` (for crash shapes bc cannot produce on demand). */
function fakeSandbox(result: Partial<ExecResult>): Sandbox {
  const full: ExecResult = { exitCode: 0, signal: null, stdout: "", stderr: "", timedOut: false, durationMs: 1, ...result };
  return {
    programId: "fake",
    hostWorkspace: "/nonexistent",
    exec: async () => full,
    writeFile: async () => {},
    destroy: async () => {},
  };
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-calc-test-"));
  chmodSync(root, 0o755);
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 10_000 } });
});

afterAll(async () => {
  await provider.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

describe("calc tasks", () => {
  it("are deterministic in (count, seed), with stable ids and prefixes", () => {
    const a = env.tasks(40, 7);
    expect(env.tasks(40, 7)).toEqual(a);
    expect(env.tasks(10, 7)).toEqual(a.slice(0, 10));
    expect(a.map((t) => t.id).slice(0, 3)).toEqual(["calc-7-0", "calc-7-1", "calc-7-2"]);
    const b = env.tasks(40, 8);
    expect(b.map((t) => t.meta.expression)).not.toEqual(a.map((t) => t.meta.expression));
    expect(env.tasks(0, 7)).toEqual([]);
    expect(() => env.tasks(-1, 7)).toThrow(/count must be an integer >= 0/);
  });

  it("are short integer expressions of 2-3 operands with matching answers and prompts", () => {
    const tasks = calcTasks(200, 3);
    const shapes = new Set<string>();
    for (const t of tasks) {
      const expr = t.meta.expression as string;
      expect(expr).toMatch(/^\(?\d+[+\-*]\(?\d+\)?(?:[+\-*]\d+\)?)?$/);
      const operands = expr.match(/\d+/g)!;
      expect(operands.length).toBeGreaterThanOrEqual(2);
      expect(operands.length).toBeLessThanOrEqual(3);
      expect(t.meta.answer).toBe(Number(evalExpr(expr)));
      expect(t.prompt).toEqual([
        { role: "system", content: expect.stringContaining("<|tool_call|>calc 12*7+3<|/tool_call|>") },
        { role: "user", content: `What is ${expr}?` },
      ]);
      shapes.add(expr.replace(/\d+/g, "n").replace(/[+\-*]/g, "o"));
    }
    // Both operand counts and both parenthesisations occur.
    expect([...shapes].sort()).toEqual(["(non)on", "no(non)", "non", "nonon"]);
  });

  it("evaluates with bc's precedence and truncating division", () => {
    expect(evalExpr("12*7+3")).toBe(87n);
    expect(evalExpr("2+3*4")).toBe(14n);
    expect(evalExpr("(2+3)*4")).toBe(20n);
    expect(evalExpr("7-10-2")).toBe(-5n);
    expect(evalExpr("-7/2")).toBe(-3n);
    expect(() => evalExpr("1/0")).toThrow(/division by zero/);
    expect(() => evalExpr("(1+2")).toThrow(/missing '\)'/);
  });
});

describe("calc checker and golden trajectories", () => {
  const tasks = env.tasks(20, 11);

  it("golden conversations are well-formed and pass the checker", async () => {
    for (const t of tasks) {
      const g = env.golden(t);
      expect(g.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
      expect(parseToolCalls(g[2]!.content).calls).toEqual([{ name: "calc", input: t.meta.expression }]);
      expect(g[3]).toEqual({ role: "tool", name: "calc", content: String(t.meta.answer) });
      expect(await env.check(t, { finalAnswer: g[4]!.content })).toEqual({ score: 1, detail: `correct: ${t.meta.answer}` });
    }
  });

  it("wrong, missing and superseded answers fail", async () => {
    const t = tasks[0]!;
    const ans = t.meta.answer as number;
    expect(checkAnswer(t, `Answer: ${ans + 1}`)).toEqual({ score: 0, detail: `wrong: expected ${ans}, got ${ans + 1}` });
    expect(checkAnswer(t, `It is ${ans}.`).score).toBe(0);
    expect(checkAnswer(t, "").detail).toMatch(/no 'Answer: <integer>' found/);
    expect(checkAnswer(t, `Answer: ${ans}\nOn reflection, Answer: ${ans - 1}`).score).toBe(0);
    expect(checkAnswer(t, `Answer: ${ans - 1}\nOn reflection,\nAnswer: ${ans}.`).score).toBe(1);
    expect(checkAnswer(t, `Answer: ${ans}.5`).score).toBe(0);
    expect(() => checkAnswer({ ...t, meta: {} }, "Answer: 1")).toThrow(/has no valid meta/);
    await expect(env.check({ ...t, meta: {} }, { finalAnswer: "Answer: 1" })).rejects.toThrow(/has no valid meta/);
  });
});

describe("calc tool in a bwrap sandbox", () => {
  it("computes inside the sandbox, matching the golden tool output", async () => {
    const sb = spy(await provider.create("calc-tool"));
    for (const t of env.tasks(5, 21)) {
      const r = await tool.run(t.meta.expression as string, sb);
      expect(r).toEqual({ ok: true, output: env.golden(t)[3]!.content });
    }
    expect(await tool.run(" 100 / 7 - (2*3) ", sb)).toEqual({ ok: true, output: "8" });
    expect(await tool.run("123456789123456789*987654321987654321", sb)).toEqual({
      ok: true,
      output: String(123456789123456789n * 987654321987654321n),
    });
    expect(sb.calls.every((argv) => argv[0] === "/usr/bin/bc")).toBe(true);
    expect(sb.calls.length).toBe(7);
    await sb.destroy();
  });

  it("agrees with bc on every generated expression", async () => {
    const sb = await provider.create("calc-bulk");
    const tasks = env.tasks(100, 5);
    const r = await sb.exec(["/usr/bin/bc", "-q"], { stdin: tasks.map((t) => `${t.meta.expression}\n`).join("") });
    expect(r.stdout.trim().split("\n")).toEqual(tasks.map((t) => String(t.meta.answer)));
    await sb.destroy();
  });

  it("setup writes the question but not the answer into the workspace", async () => {
    const sb = await provider.create("calc-setup");
    const t = env.tasks(1, 4)[0]!;
    await env.setup(t, sb);
    const onHost = JSON.parse(readFileSync(join(sb.hostWorkspace, "task.json"), "utf8"));
    expect(onHost).toEqual({ id: t.id, question: `What is ${t.meta.expression}?` });
    const inside = await sb.exec(["cat", "/workspace/task.json"]);
    expect(JSON.parse(inside.stdout)).toEqual(onHost);
    await sb.destroy();
  });

  it("rejects bad input without running anything", async () => {
    const sb = spy(await provider.create("calc-bad"));
    const cases: [string, RegExp][] = [
      ["", /empty expression/],
      ["12*7; quit", /invalid character ";" at position 4/],
      ["a=1", /invalid character "a" at position 0/],
      ["1\n2", /invalid character "\\n" at position 1/],
      ["2^10", /invalid character "\^"/],
      ["1+".repeat(100) + "1", new RegExp(`too long \\(201 chars, max ${CALC_MAX_INPUT}\\)`)],
    ];
    for (const [input, msg] of cases) {
      const r = await tool.run(input, sb);
      expect(r.ok).toBe(false);
      expect(r.crashed).toBeFalsy();
      expect(r.output).toMatch(msg);
    }
    expect(sb.calls).toEqual([]);
    await sb.destroy();
  });

  it("reports bc's own errors as failures, not crashes", async () => {
    const sb = await provider.create("calc-err");
    expect(await tool.run("5/0", sb)).toEqual({ ok: false, output: "calc error: Divide by zero" });
    expect(await tool.run("(1+", sb)).toEqual({ ok: false, output: "calc error: syntax error" });
    await sb.destroy();
  });

  it("reports a tool crash when limits kill bc", async () => {
    const tight = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 1, wallMs: 10_000 } });
    const sb = await tight.create("calc-oom");
    const oom = await tool.run("1+1", sb);
    expect(oom).toMatchObject({ ok: false, crashed: true });
    expect(oom.output).toMatch(/^calc crashed: bc exited with code 127/);
    await tight.destroyAll();

    const slow = createBwrapProvider({ root, limits: { cpuSeconds: 5, memoryMb: 256, wallMs: 1 } });
    const sb2 = await slow.create("calc-wall");
    const to = await tool.run("1+1", sb2);
    expect(to).toMatchObject({ ok: false, crashed: true });
    expect(to.output).toMatch(/^calc crashed: timed out after \d+ ms/);
    await slow.destroyAll();

    const segv = await tool.run("1+1", fakeSandbox({ exitCode: null, signal: "SIGSEGV" }));
    expect(segv).toEqual({ ok: false, crashed: true, output: "calc crashed: bc was killed by SIGSEGV" });
  });
});
