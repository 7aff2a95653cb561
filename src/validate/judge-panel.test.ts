import { describe, expect, it } from "vitest";
import type { JudgeChat } from "../reward/judge/gateway-chat.js";
import type { DatasetTask } from "./dataset.js";
import { panelPrompt, parseVerdict, reviewTask } from "./judge-panel.js";

const task: DatasetTask = { task: { id: "t", prompt: [{ role: "system", content: "sys" }, { role: "user", content: "What is 2+2?" }], meta: {} }, tests: "answer 4" };
const says = (text: string): JudgeChat => async () => text;

describe("judge panel", () => {
  it("reads the last VERDICT line", () => {
    expect(parseVerdict("VERDICT: CONSISTENT")).toBe("consistent");
    expect(parseVerdict("verdict: consistent ... on reflection VERDICT: INCONSISTENT")).toBe("inconsistent");
    expect(parseVerdict("VERDICT: CONSISTENTLY")).toBeUndefined();
    expect(parseVerdict("seems fine")).toBeUndefined();
  });
  it("shows the judges the instruction and the checker, cutting long tests", () => {
    const [, user] = panelPrompt({ ...task, tests: "x".repeat(50) }, 10);
    expect(user?.content).toContain("Instruction:\nWhat is 2+2?");
    expect(user?.content).toContain(`Checker:\n${"x".repeat(10)}\n[… 40 more characters cut]`);
    expect(user?.content).not.toContain("sys");
  });
  it("keeps a task on a strict majority; a judge without a usable vote does not approve", async () => {
    const yes = says("VERDICT: CONSISTENT");
    const no = says("VERDICT: INCONSISTENT");
    const mumble = says("hmm");
    expect((await reviewTask([{ model: "a", chat: yes }, { model: "b", chat: yes }, { model: "c", chat: no }], task)).ok).toBe(true);
    const r = await reviewTask([{ model: "a", chat: yes }, { model: "b", chat: mumble }], task, { maxAttempts: 2 });
    expect(r).toMatchObject({ ok: false, approvals: 1, needed: 2 });
    expect(r.votes[1]).toEqual({ model: "b", error: "judge model 'b' gave no usable answer (VERDICT) for task 't' after 2 attempt(s); last: unparsable answer \"hmm\"" });
    expect((await reviewTask([{ model: "a", chat: yes }, { model: "b", chat: mumble }], task, { maxAttempts: 1, minApprovals: 1 })).ok).toBe(true);
  });
  it("is undecided, not rejecting, when unreachable judges' votes could have kept the task", async () => {
    const yes = says("VERDICT: CONSISTENT");
    const no = says("VERDICT: INCONSISTENT");
    const down: JudgeChat = async () => {
      throw new Error("connect ECONNREFUSED 127.0.0.1:9");
    };
    const undecided = await reviewTask([{ model: "a", chat: yes }, { model: "b", chat: down }, { model: "c", chat: says("hmm") }], task, { maxAttempts: 1 });
    expect(undecided).toMatchObject({ ok: false, approvals: 1, needed: 2, undecided: true });
    expect(undecided.votes[1]).toEqual({ model: "b", unreachable: true, error: "judge model 'b' could not be reached (VERDICT) for task 't': 1 attempt(s) failed; last: request failed: connect ECONNREFUSED 127.0.0.1:9" });
    // An unparsable answer is an answer: no undecided vote from it.
    expect(undecided.votes[2]?.unreachable).toBeUndefined();
    // Two rejections decide whatever the unreachable judge would have said.
    const rejected = await reviewTask([{ model: "a", chat: no }, { model: "b", chat: down }, { model: "c", chat: no }], task, { maxAttempts: 1 });
    expect(rejected).toMatchObject({ ok: false, approvals: 0 });
    expect(rejected.undecided).toBeUndefined();
  });
  it("rejects an empty panel and an impossible approval count", async () => {
    await expect(reviewTask([], task)).rejects.toThrow("validate: the judge panel needs at least one judge");
    await expect(reviewTask([{ model: "a", chat: says("") }], task, { minApprovals: 2 })).rejects.toThrow("validate: minApprovals must be an integer in 1..1 (the number of judges), got 2");
  });
});
