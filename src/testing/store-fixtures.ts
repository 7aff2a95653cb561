// Builders of runs, groups, programs and calls for tests of the store and of its consumers.
import type { Call, Group, Program } from "../core/types.js";
import type { NewRun, TrajectoryStore } from "../store/trajectory-store.js";

/** A run record with fixed timestamps. */
export function fixtureRun(id = "run-1"): NewRun {
  return { id, name: `name-${id}`, configJson: JSON.stringify({ seed: 1, run: id }), startedAt: 1000 };
}

/** A group of `n` programs `${id}-p0..`. */
export function fixtureGroup(id: string, runId = "run-1", n = 2, taskId = `task-${id}`): Group {
  return { id, runId, taskId, programIds: Array.from({ length: n }, (_, i) => `${id}-p${i}`) };
}

/** An active program of `group` at `sampleIndex`. */
export function fixtureProgram(group: Group, sampleIndex: number): Program {
  return {
    id: group.programIds[sampleIndex] ?? `${group.id}-p${sampleIndex}`,
    runId: group.runId,
    taskId: group.taskId,
    groupId: group.id,
    sampleIndex,
    state: "active",
    createdAt: 2000 + sampleIndex,
  };
}

/** A call with distinct prompt/output tokens and the given output logprobs (one token per logprob). */
export function fixtureCall(programId: string, index: number, logprobs: number[], promptLen = 3): Call {
  const base = index * 100;
  return {
    id: `${programId}-c${index}`,
    programId,
    index,
    messages: [
      { role: "system", content: "sys" },
      { role: "user", content: `question ${index}` },
      ...(index > 0 ? [{ role: "tool" as const, content: "42", name: "calc" }] : []),
    ],
    promptTokenIds: Array.from({ length: promptLen }, (_, i) => base + i + 1),
    outputTokenIds: logprobs.map((_, i) => 50_000 + base + i),
    logprobs,
    outputText: `answer ${index}`,
    finishReason: "stop",
    backend: "builtin-0",
    policyVersion: 3,
    timings: { start: 10 + index, end: 20.5 + index },
  };
}

/**
 * An agent's program of 5 calls, each resending the conversation: a call's prompt is the last one's prompt and
 * output and a few new tokens, its messages the last one's and new ones; call 2 follows a context reset (it keeps
 * only the system prompt and the start of the prompt).
 */
export function conversation(programId: string): Call[] {
  const sys = { role: "system" as const, content: "You solve tasks. ".repeat(20) };
  const calls: Call[] = [];
  let messages: Call["messages"] = [sys, { role: "user", content: "task" }];
  let prompt = Array.from({ length: 50 }, (_, i) => i + 1);
  for (let index = 0; index < 5; index++) {
    const output = [900 + 10 * index, 901 + 10 * index, 902 + 10 * index];
    calls.push({ ...fixtureCall(programId, index, output.map((_, i) => -0.25 * (i + 1))), messages, promptTokenIds: prompt, outputTokenIds: output });
    const answer = { role: "assistant" as const, content: `answer ${index}` };
    const next = { role: "tool" as const, content: `result ${index}`, name: "calc" };
    if (index === 1) {
      messages = [sys, { role: "user", content: "summary of the task so far" }];
      prompt = [...prompt.slice(0, 10), 70, 71, 72];
    } else {
      messages = [...messages, answer, next];
      prompt = [...prompt, ...output, 60 + index];
    }
  }
  return calls;
}

/** Run run-1 with program g1-p0 (group g1) in `store`; the calls of a {@link conversation} for it, not recorded yet. */
export async function conversationProgram(store: TrajectoryStore): Promise<Call[]> {
  const g = fixtureGroup("g1", "run-1", 1);
  await store.createRun(fixtureRun());
  await store.createGroup(g);
  await store.createProgram(fixtureProgram(g, 0));
  return conversation("g1-p0");
}
