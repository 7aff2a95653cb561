// The environment contract, for every registered environment: deterministic tasks, well-formed
// golden conversations, and "golden solutions pass, empty solutions fail" for every task.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBwrapProvider, type BwrapProvider } from "../sandbox/bwrap.js";
import type { Environment, Task } from "./env.js";
import { createEnvironment, environmentNames } from "./registry.js";
import { loadSweTasks } from "./swe-mini/task-data.js";

let root: string;
let provider: BwrapProvider;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "arbor-golden-test-"));
  chmodSync(root, 0o755);
  provider = createBwrapProvider({ root, limits: { cpuSeconds: 20, memoryMb: 4096, wallMs: 60_000 } });
});

afterAll(async () => {
  await provider.destroyAll();
  rmSync(root, { recursive: true, force: true });
});

/** For one task in one fresh sandbox: the empty solution scores 0, then the golden one scores 1. */
async function emptyThenGolden(env: Environment, task: Task): Promise<{ empty: number; golden: number; detail: string }> {
  const sb = await provider.create(`golden-${task.id}`);
  try {
    await env.setup(task, sb);
    const empty = await env.check(task, { finalAnswer: "", sandbox: sb });
    const answer = await env.solveGolden(task, sb);
    const golden = await env.check(task, { finalAnswer: answer, sandbox: sb });
    return { empty: empty.score, golden: golden.score, detail: `${task.id}: empty '${empty.detail}', golden '${golden.detail}'` };
  } finally {
    await sb.destroy();
  }
}

/** Run `fn` over `items` with at most `n` in flight. */
async function parallel<T, R>(items: readonly T[], n: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T);
      }
    }),
  );
  return out;
}

/** How many tasks each environment is checked on (every task where the set is finite). */
const COUNTS: Record<string, () => number> = { calc: () => 30, "search-qa": () => 60, "swe-mini": () => loadSweTasks().length };

describe("every environment", () => {
  it("is covered here, and swe-mini has at least 20 tasks", () => {
    expect(Object.keys(COUNTS).sort()).toEqual([...environmentNames].sort());
    expect(COUNTS["swe-mini"]!()).toBeGreaterThanOrEqual(20);
  });

  for (const name of environmentNames) {
    it(`${name}: deterministic tasks, well-formed golden conversations, valid tool names`, () => {
      const env = createEnvironment(name);
      const n = COUNTS[name]!();
      const tasks = env.tasks(n, 1);
      expect(env.tasks(n, 1)).toEqual(tasks);
      expect(new Set(tasks.map((t) => t.id)).size).toBe(n);
      for (const tool of env.tools()) expect(tool.name).toMatch(/^[A-Za-z_][\w-]*$/);
      for (const t of tasks) {
        const g = env.golden(t);
        expect(g.slice(0, t.prompt.length)).toEqual(t.prompt);
        expect(g[g.length - 1]!.role).toBe("assistant");
      }
    });

    // One retry: twice in full-suite runs under heavy load a swe-mini sandbox command ended by SIGKILL with no
    // limit named (planting a bug; `node --test`) — not understood yet, and a real failure fails both tries.
    it(`${name}: the golden solution passes and the empty solution fails, for every task`, { timeout: 120_000, retry: 1 }, async () => {
      const env = createEnvironment(name);
      const tasks = env.tasks(COUNTS[name]!(), 17);
      const results = await parallel(tasks, 2, (t) => emptyThenGolden(env, t));
      for (const r of results) expect({ empty: r.empty, golden: r.golden }, r.detail).toEqual({ empty: 0, golden: 1 });
    });
  }
});
