// The contract every Environment passes — the shipped ones (golden.test.ts) and a user's module
// (examples/custom-env through cli/custom-env.test.ts): deterministic tasks with distinct ids, tool names
// the markup accepts, golden conversations that extend the task's prompt and end with the assistant, and
// for every task "the empty solution fails, the golden solution passes" in a fresh bwrap sandbox.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createBwrapProvider, type BwrapProvider } from "../sandbox/bwrap.js";
import type { Environment, Task } from "./env.js";

export interface EnvironmentContractOptions {
  /** How many tasks to draw from `env.tasks(count, seed)` (every task where the set is finite). */
  count: number;
  /** Check these tasks (e.g. a task file's) instead of drawn ones; determinism is still checked on drawn ones. */
  tasks?: () => Promise<Task[]> | Task[];
}

/** For one task in one fresh sandbox: the empty solution scores 0, then the golden one scores 1. */
async function emptyThenGolden(provider: BwrapProvider, env: Environment, task: Task): Promise<{ empty: number; golden: number; detail: string }> {
  const sb = await provider.create(`golden-${task.id.replace(/[^\w.-]/g, "_")}`);
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

/** Register the contract tests for the environment `make` creates (fresh for each test). */
export function environmentContract(name: string, make: () => Promise<Environment> | Environment, opts: EnvironmentContractOptions): void {
  let root: string;
  let provider: BwrapProvider;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "arbor-env-contract-"));
    chmodSync(root, 0o755);
    provider = createBwrapProvider({ root, limits: { cpuSeconds: 20, memoryMb: 4096, wallMs: 60_000 } });
  });

  afterAll(async () => {
    await provider.destroyAll();
    rmSync(root, { recursive: true, force: true });
  });

  it(`${name}: deterministic tasks, well-formed golden conversations, valid tool names`, async () => {
    const env = await make();
    const n = opts.count;
    const drawn = env.tasks(n, 1);
    expect(env.tasks(n, 1)).toEqual(drawn);
    expect(new Set(drawn.map((t) => t.id)).size).toBe(n);
    for (const tool of env.tools()) expect(tool.name).toMatch(/^[A-Za-z_][\w-]*$/);
    const tasks = opts.tasks ? await opts.tasks() : drawn;
    for (const t of tasks) {
      const g = env.golden(t);
      expect(g.slice(0, t.prompt.length)).toEqual(t.prompt);
      expect(g[g.length - 1]!.role).toBe("assistant");
    }
  });

  // One retry: twice in full-suite runs under heavy load a swe-mini sandbox command ended by SIGKILL with no
  // limit named (planting a bug; `node --test`) — not understood yet, and a real failure fails both tries.
  it(`${name}: the golden solution passes and the empty solution fails, for every task`, { timeout: 120_000, retry: 1 }, async () => {
    const env = await make();
    const tasks = opts.tasks ? await opts.tasks() : env.tasks(opts.count, 17);
    expect(tasks.length).toBeGreaterThan(0);
    const results = await parallel(tasks, 2, (t) => emptyThenGolden(provider, env, t));
    for (const r of results) expect({ empty: r.empty, golden: r.golden }, r.detail).toEqual({ empty: 0, golden: 1 });
  });
}
