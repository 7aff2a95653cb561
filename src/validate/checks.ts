// The two mechanical task checks (ROLL/Forge task validation, TECHNIQUES §E), each in a fresh
// sandbox prepared by the environment's own set-up: the ground-truth check applies the golden
// solution and must pass; the no-op check changes nothing, answers nothing, and must fail.
import type { Environment } from "../envs/env.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import type { DatasetTask } from "./dataset.js";

/** One check of one task. */
export interface CheckOutcome {
  /** True when the task behaved as it must (golden passed / no-op failed). */
  ok: boolean;
  /** The checker's score; absent when the check could not run. */
  score?: number;
  detail: string;
  /** Set-up, golden solution or checker threw (the task is dropped). */
  error?: string;
}

export interface CheckOptions {
  /** A final answer passes when the checker scores it at least this (default 1). */
  passScore?: number;
  /** Prefix of sandbox ids (unique per run). */
  sandboxPrefix: string;
}

async function inSandbox<T>(sandboxes: SandboxProvider, id: string, fn: (sb: Awaited<ReturnType<SandboxProvider["create"]>>) => Promise<T>): Promise<T> {
  const sb = await sandboxes.create(id);
  try {
    return await fn(sb);
  } finally {
    await sb.destroy();
  }
}

function failed(e: unknown): CheckOutcome {
  const error = e instanceof Error ? e.message : String(e);
  return { ok: false, detail: `error: ${error}`, error };
}

/** Ground truth: the golden solution, applied in a fresh sandbox, must pass the checker. */
export async function groundTruthCheck(env: Environment, t: DatasetTask, sandboxes: SandboxProvider, opts: CheckOptions): Promise<CheckOutcome> {
  try {
    return await inSandbox(sandboxes, `${opts.sandboxPrefix}/golden/${t.task.id}`, async (sb) => {
      await env.setup(t.task, sb);
      const answer = t.golden ?? (await env.solveGolden(t.task, sb));
      const r = await env.check(t.task, { finalAnswer: answer, sandbox: sb });
      return { ok: r.score >= (opts.passScore ?? 1), score: r.score, detail: r.detail };
    });
  } catch (e) {
    return failed(e);
  }
}

/** No-op: with nothing changed and an empty answer, the checker must not pass. */
export async function noOpCheck(env: Environment, t: DatasetTask, sandboxes: SandboxProvider, opts: CheckOptions): Promise<CheckOutcome> {
  try {
    return await inSandbox(sandboxes, `${opts.sandboxPrefix}/noop/${t.task.id}`, async (sb) => {
      await env.setup(t.task, sb);
      const r = await env.check(t.task, { finalAnswer: "", sandbox: sb, tools: [] });
      return { ok: r.score < (opts.passScore ?? 1), score: r.score, detail: r.detail };
    });
  } catch (e) {
    return failed(e);
  }
}
