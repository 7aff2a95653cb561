// The search-qa environment: questions about a local corpus answered with `search` and `open`;
// exact-match answers. Documents are long relative to the question, so contexts fill up fast:
// the environment for discard-all context management.
import { formatToolCall } from "../../model/markup.js";
import { ArborError } from "../../core/errors.js";
import type { ChatMessage } from "../../core/types.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import type { CheckContext, CheckResult, Environment, SetupOptions, SetupReport, Task, Tool } from "../env.js";
import type { EnvVariant } from "../variants.js";
import { extractAnswer, normalizeAnswer } from "./answer.js";
import { questionFor } from "./questions.js";
import { createSearchTools, DEFAULT_SEARCH, openOutput, searchOutput, type SearchConfig } from "./tools.js";

export const SEARCH_QA_SYSTEM_PROMPT = [
  "You answer questions using a document collection. Call one tool per message, like this:",
  formatToolCall("search", "Brightholm river"),
  "Tools:",
  "- search <query>: the best matching documents (id, title, snippet)",
  "- open <doc id>: a whole document",
  "Give the final answer on its own line as",
  "Answer: <answer>",
].join("\n");

const VARIANTS: EnvVariant[] = [
  { id: "top5", kind: "variant", description: "search shows 5 results with 120-character snippets", env: { SEARCH_TOP_K: "5", SEARCH_SNIPPET: "120" }, weight: 2 },
  { id: "top3-long", kind: "variant", description: "search shows 3 results with 240-character snippets", env: { SEARCH_TOP_K: "3", SEARCH_SNIPPET: "240" } },
  { id: "top8-short", kind: "variant", description: "search shows 8 results with 60-character snippets", env: { SEARCH_TOP_K: "8", SEARCH_SNIPPET: "60" } },
  { id: "titles-only", kind: "perturbation", description: "degraded search: titles only, no snippets", env: { SEARCH_TOP_K: "5", SEARCH_SNIPPET: "0" }, weight: 0.5 },
];

function configFrom(variant: EnvVariant | undefined): SearchConfig {
  const k = Number(variant?.env?.SEARCH_TOP_K ?? DEFAULT_SEARCH.topK);
  const s = Number(variant?.env?.SEARCH_SNIPPET ?? DEFAULT_SEARCH.snippetChars);
  if (!Number.isInteger(k) || k < 1 || !Number.isInteger(s) || s < 0) throw new ArborError(`search-qa: variant ${variant?.id} has a bad search config`, "config");
  return { topK: k, snippetChars: s };
}

function metaOf(task: Task): { answer: string; hops: { query: string; docId: string }[] } {
  const { answer, hops } = task.meta;
  if (typeof answer !== "string" || !Array.isArray(hops)) throw new ArborError(`search-qa: task ${task.id} has no valid meta (answer, hops)`, "env");
  return { answer, hops: hops as { query: string; docId: string }[] };
}

/** Create the search-qa environment. */
export function createSearchQaEnvironment(): Environment {
  const configs = new WeakMap<Sandbox, SearchConfig>();
  const tools = createSearchTools((sb) => configs.get(sb) ?? DEFAULT_SEARCH);
  return {
    name: "search-qa",
    tasks(count: number, seed: number): Task[] {
      if (!Number.isInteger(count) || count < 0) throw new RangeError(`search-qa tasks: count must be an integer >= 0, got ${count}`);
      return Array.from({ length: count }, (_, i) => {
        const q = questionFor(seed, i);
        return {
          id: `search-qa-${seed}-${i}`,
          prompt: [
            { role: "system", content: SEARCH_QA_SYSTEM_PROMPT },
            { role: "user", content: q.question },
          ],
          meta: { kind: q.kind, answer: q.answer, hops: q.hops },
        };
      });
    },
    tools: (): Tool[] => tools,
    variants: () => VARIANTS,
    async setup(task: Task, sandbox: Sandbox, opts: SetupOptions = {}): Promise<SetupReport> {
      metaOf(task);
      configs.set(sandbox, configFrom(opts.variant));
      return opts.variant ? { variant: opts.variant.id } : {};
    },
    async check(task: Task, ctx: CheckContext): Promise<CheckResult> {
      const { answer } = metaOf(task);
      const got = extractAnswer(ctx.finalAnswer);
      if (got === undefined) return { score: 0, detail: `no 'Answer: ...' line (expected ${answer})` };
      if (normalizeAnswer(got) === normalizeAnswer(answer)) return { score: 1, detail: `correct: ${answer}` };
      return { score: 0, detail: `wrong: expected ${answer}, got ${got}` };
    },
    async solveGolden(task: Task): Promise<string> {
      return `Answer: ${metaOf(task).answer}`;
    },
    golden(task: Task): ChatMessage[] {
      const { answer, hops } = metaOf(task);
      const msgs: ChatMessage[] = task.prompt.map((m) => ({ ...m }));
      for (const h of hops) {
        msgs.push({ role: "assistant", content: formatToolCall("search", h.query) });
        msgs.push({ role: "tool", name: "search", content: searchOutput(h.query, DEFAULT_SEARCH).output });
        msgs.push({ role: "assistant", content: formatToolCall("open", h.docId) });
        msgs.push({ role: "tool", name: "open", content: openOutput(h.docId).output });
      }
      msgs.push({ role: "assistant", content: `Answer: ${answer}` });
      return msgs;
    },
  };
}
