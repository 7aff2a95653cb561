// The `summarize` context policy: once the context passes a share of the window, the turns between
// the task messages and the most recent ones are compacted into one summary message — written by
// the model itself through the program's endpoint (so the summary is trained on too), or, without
// model access or when configured so, by a deterministic extractive summary.
import type { AgentMessage } from "../agent-message.js";
import { thresholdTokens, type ContextPolicy } from "./context-policy.js";

export interface SummarizeOptions {
  windowTokens: number;
  /** Share of the window that triggers compaction (default 0.8). */
  threshold?: number;
  /** Most recent messages kept as they are (default 2; extended so no tool result loses its call). */
  keepLast?: number;
  /** `model` (default): ask the model; `extractive`: first lines of each dropped message. */
  summarizer?: "model" | "extractive";
  /** Budget of the model's summary, tokens (default 256). */
  summaryTokens?: number;
  /** Longest summary kept, characters (default 2000; the most recent part is kept). */
  maxSummaryChars?: number;
}

export const SUMMARY_PREFIX = "Summary of the earlier turns:\n";
const SUMMARY_INSTRUCTIONS =
  "Summarize the conversation below for your own later use: the facts found, tool results, and what remains to do. Be brief.";

/** One line per message: role, tool name, then the first line of its text and of its calls. */
export function extractiveSummary(messages: readonly AgentMessage[], maxChars: number): string {
  const lines = messages.map((m) => {
    const who = m.name ? `${m.role}(${m.name})` : m.role;
    const first = (m.content.trim().split("\n")[0] ?? "").slice(0, 200);
    const calls = (m.toolCalls ?? []).map((c) => ` [call ${c.name} ${c.arguments.slice(0, 120)}]`).join("");
    return `${who}: ${first}${calls}`;
  });
  let text = lines.join("\n");
  if (text.length > maxChars) text = `…${text.slice(text.length - maxChars + 1)}`;
  return text;
}

/** Where the kept tail starts: `keepLast` from the end, moved back past tool results to their call. */
export function tailStart(messages: readonly AgentMessage[], from: number, keepLast: number): number {
  let cut = Math.max(from, messages.length - keepLast);
  while (cut > from && messages[cut]?.role === "tool") cut--;
  return cut;
}

/** Compact earlier turns into a summary when the context passes `threshold × windowTokens`. */
export function createSummarizePolicy(o: SummarizeOptions): ContextPolicy {
  const limit = thresholdTokens("summarize", o.windowTokens, o.threshold ?? 0.8);
  const keepLast = o.keepLast ?? 2;
  const maxChars = o.maxSummaryChars ?? 2000;
  const summaryTokens = o.summaryTokens ?? 256;
  if (!(Number.isInteger(keepLast) && keepLast >= 0)) throw new Error(`context policy summarize: keepLast must be an integer >= 0, got ${keepLast}`);
  if (!(Number.isInteger(summaryTokens) && summaryTokens > 0)) throw new Error(`context policy summarize: summaryTokens must be a positive integer, got ${summaryTokens}`);
  return {
    name: "summarize",
    async apply(view) {
      if (view.trigger !== "before-call" || view.tokens <= limit) return undefined;
      const from = view.initial.length;
      const cut = tailStart(view.messages, from, keepLast);
      const dropped = view.messages.slice(from, cut);
      if (dropped.length === 0) return undefined;
      let summary: string;
      if ((o.summarizer ?? "model") === "model" && view.complete) {
        const transcript = extractiveSummary(dropped, Number.MAX_SAFE_INTEGER);
        const r = await view.complete(
          [
            { role: "system", content: SUMMARY_INSTRUCTIONS },
            { role: "user", content: transcript },
          ],
          summaryTokens,
        );
        summary = r.text.trim().slice(0, maxChars);
      } else {
        summary = extractiveSummary(dropped, maxChars);
      }
      const messages: AgentMessage[] = [...view.initial, { role: "user", content: SUMMARY_PREFIX + summary }, ...view.messages.slice(cut)];
      return { action: "summarize", messages, detail: summary };
    },
  };
}
