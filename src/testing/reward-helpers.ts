// Hand-built trajectories and a tiny fake Environment for the reward tests.
import type { Call, Termination, Trajectory } from "../core/types.js";
import type { CheckResult, Environment, Task } from "../envs/env.js";
import { finalAnswer } from "./final-answer.js";
import type { RewardContext } from "../reward/reward-fn.js";

/** An environment whose checker gives 1 for the exact answer, 0.5 for one containing it, else 0. */
export function fakeEnv(): Environment & { checked: string[]; checkNow(task: Task, answer: string): CheckResult } {
  const checked: string[] = [];
  const checkNow = (task: Task, answer: string): CheckResult => {
    checked.push(answer);
    const want = String(task.meta.answer);
    const score = answer.trim() === want ? 1 : answer.includes(want) ? 0.5 : 0;
    return { score, detail: `want ${want}` };
  };
  return {
    name: "fake",
    checked,
    checkNow,
    tasks: () => [],
    tools: () => [],
    setup: async () => ({}),
    check: async (task, c) => checkNow(task, c.finalAnswer),
    golden: () => [],
    solveGolden: async (task) => String(task.meta.answer),
  };
}

export const task: Task = { id: "t1", prompt: [{ role: "user", content: "6*7?" }], meta: { answer: "42" } };

export function call(index: number, outputText: string): Call {
  return {
    id: `c${index}`,
    programId: "p",
    index,
    messages: [],
    promptTokenIds: [1],
    outputTokenIds: [2],
    logprobs: [-0.1],
    outputText,
    finishReason: "stop",
    backend: "b",
    policyVersion: 0,
    timings: { start: 0, end: 1 },
  };
}

export function trajectory(texts: string[], termination?: Termination): Trajectory {
  return {
    program: {
      id: "p",
      runId: "r",
      taskId: task.id,
      groupId: "g",
      sampleIndex: 0,
      state: termination ? "terminated" : "active",
      createdAt: 0,
      ...(termination ? { termination, endedAt: 5 } : {}),
    },
    calls: texts.map((t, i) => call(i, t)),
    tools: [],
  };
}

/** The reward context the rollout builds: the checker runs only for completed programs. */
export function ctx(t: Trajectory, env = fakeEnv()): RewardContext {
  const answer = finalAnswer(t);
  const check = t.program.termination?.kind === "completed" ? env.checkNow(task, answer) : undefined;
  return { trajectory: t, task, env, finalAnswer: answer, ...(check ? { check } : {}) };
}

