// The judge panel (TECHNIQUES §E: multi-model LLM-as-judge review of instruction/test pairs): k
// judge models, each called through the gateway, read a task's instruction and what its checker
// tests and vote whether they agree; the task stays when a strict majority of the k votes say
// CONSISTENT. A judge that gives no usable vote (after bounded retries) counts as not approving; one that
// could not be reached at all says nothing about the task, and where its votes could have kept the task
// the panel is undecided rather than rejecting.
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import { askParsed } from "../reward/judge/ask-parsed.js";
import type { JudgeChat } from "../reward/judge/gateway-chat.js";
import type { DatasetTask } from "./dataset.js";

export interface PanelJudge {
  model: string;
  chat: JudgeChat;
}

export interface PanelOptions {
  /** Attempts per judge and task (default 3). */
  maxAttempts?: number;
  /** Votes needed to keep a task (default: a strict majority of the judges). */
  minApprovals?: number;
  /** Longest test text shown to a judge, characters (default 6000); the rest is cut with a note. */
  maxTestChars?: number;
}

export type Verdict = "consistent" | "inconsistent";

export interface Vote {
  model: string;
  verdict?: Verdict;
  /** Why the judge gave no vote. */
  error?: string;
  /** Every request to the judge failed (gateway down or refusing): no answer, not a rejection. */
  unreachable?: true;
}

export interface PanelResult {
  ok: boolean;
  approvals: number;
  needed: number;
  votes: Vote[];
  /** Too few approvals, but the unreachable judges' votes could have made enough: the panel did not decide. */
  undecided?: true;
}

export const PANEL_SYSTEM_PROMPT = [
  "You review tasks for training coding and reasoning agents. You get a task's instruction and what",
  "its automatic checker tests. Decide whether they are consistent: a correct solution of the",
  "instruction passes the checker, and the checker tests what the instruction asks for.",
  "Reply with one line: VERDICT: CONSISTENT or VERDICT: INCONSISTENT",
].join("\n");

/** The conversation a panel judge gets for one task. */
export function panelPrompt(t: DatasetTask, maxTestChars = 6000): ChatMessage[] {
  const instruction = t.task.prompt.filter((m) => m.role === "user").map((m) => m.content).join("\n\n");
  const tests = t.tests.length > maxTestChars ? `${t.tests.slice(0, maxTestChars)}\n[… ${t.tests.length - maxTestChars} more characters cut]` : t.tests;
  return [
    { role: "system", content: PANEL_SYSTEM_PROMPT },
    { role: "user", content: `Instruction:\n${instruction}\n\nChecker:\n${tests}\n\nReply with VERDICT: CONSISTENT or VERDICT: INCONSISTENT.` },
  ];
}

/** The verdict of a panel answer (its last VERDICT line), or undefined. */
export function parseVerdict(text: string): Verdict | undefined {
  const m = [...text.matchAll(/\bverdict\s*:\s*(consistent|inconsistent)\b/gi)].pop();
  return m ? ((m[1] as string).toLowerCase() as Verdict) : undefined;
}

/** Ask every judge about one task, concurrently, and tally the votes. */
export async function reviewTask(judges: readonly PanelJudge[], t: DatasetTask, opts: PanelOptions = {}): Promise<PanelResult> {
  if (judges.length === 0) throw new ArborError("validate: the judge panel needs at least one judge", "config");
  const needed = opts.minApprovals ?? Math.floor(judges.length / 2) + 1;
  if (!(Number.isInteger(needed) && needed >= 1 && needed <= judges.length)) {
    throw new ArborError(`validate: minApprovals must be an integer in 1..${judges.length} (the number of judges), got ${needed}`, "config");
  }
  const messages = panelPrompt(t, opts.maxTestChars);
  const votes = await Promise.all(
    judges.map(async (j): Promise<Vote> => {
      try {
        const r = await askParsed(j.chat, { model: j.model, messages, maxTokens: 32, temperature: 0, label: `validate/${t.task.id}/${j.model}`, taskId: t.task.id }, parseVerdict, opts.maxAttempts ?? 3, `(VERDICT) for task '${t.task.id}'`);
        return { model: j.model, verdict: r.value };
      } catch (e) {
        const unreachable = e instanceof ArborError && e.code === "judge_unreachable";
        return { model: j.model, error: e instanceof Error ? e.message : String(e), ...(unreachable ? { unreachable: true as const } : {}) };
      }
    }),
  );
  const approvals = votes.filter((v) => v.verdict === "consistent").length;
  const unreachable = votes.filter((v) => v.unreachable).length;
  const undecided = approvals < needed && approvals + unreachable >= needed;
  return { ok: approvals >= needed, approvals, needed, votes, ...(undecided ? { undecided: true as const } : {}) };
}
