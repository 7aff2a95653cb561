// An environment of your own: shop arithmetic word problems ("2 pens at 3 and a book at 12: what do they
// cost?"), solved with a calculator tool that runs `bc` inside the program's sandbox. `arbor run` loads it
// from the config's `env.module: ./my-env.ts` (the default export: a factory, or an Environment object).
// Types only come from arbor-rl, so the module needs nothing at run time but Node and what it imports itself.
import type { ChatMessage, Environment, Sandbox, Task, Tool } from "arbor-rl";

/** The tool-call markup of Arbor's tiny models (model/markup.ts): `<|tool_call|>name input<|/tool_call|>`. */
const call = (tool: string, input: string): string => `<|tool_call|>${tool} ${input}<|/tool_call|>`;

export const SYSTEM_PROMPT = [
  "You solve shop arithmetic questions exactly. You have one tool, calc, which evaluates an integer",
  "expression (digits, spaces, + - * / and parentheses; / divides and drops the remainder).",
  "To call it, write the tool call on its own, exactly like this:",
  call("calc", "12*7+3"),
  "The result comes back in the next message. Then give the final answer on its own line as",
  "Answer: <number>",
].join("\n");

interface ShopMeta {
  expression: string;
  answer: number;
}

function metaOf(task: Task): ShopMeta {
  const { expression, answer } = task.meta;
  if (typeof expression !== "string" || typeof answer !== "number") throw new Error(`shop: task ${task.id} needs meta {expression, answer}`);
  return { expression, answer };
}

const ITEMS = ["pen", "book", "apple", "lamp", "cup"] as const;

/** A small deterministic generator (LCG) so `tasks(count, seed)` is the same list every time. */
function lcg(seed: number): () => number {
  let s = (seed * 2654435761) >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
}

/** Task `i` of `seed`: two items, a count of the first, their prices. */
export function shopTask(seed: number, i: number): Task {
  const next = lcg(seed * 1000 + i + 1);
  const a = ITEMS[next() % ITEMS.length] as string;
  const b = ITEMS[(ITEMS.indexOf(a as (typeof ITEMS)[number]) + 1 + (next() % (ITEMS.length - 1))) % ITEMS.length] as string;
  const n = 2 + (next() % 4);
  const pa = 1 + (next() % 9);
  const pb = 2 + (next() % 19);
  const expression = `${n}*${pa}+${pb}`;
  return {
    id: `shop-${seed}-${i}`,
    prompt: [
      { role: "system", content: SYSTEM_PROMPT },
      { role: "user", content: `One ${a} costs ${pa} and one ${b} costs ${pb}. What do ${n} ${a}s and one ${b} cost?` },
    ],
    meta: { expression, answer: n * pa + pb },
  };
}

/** The calculator: checks the input, then runs bc in the sandbox (so even a misbehaving tool stays confined). */
const calcTool: Tool = {
  name: "calc",
  description: "Evaluate an integer arithmetic expression: digits, spaces, + - * / ( ).",
  async run(input: string, sandbox: Sandbox) {
    const expr = input.trim();
    if (!/^[\d\s+\-*/()]{1,200}$/.test(expr)) return { ok: false, output: "calc: only digits, spaces and + - * / ( ) are allowed (at most 200 characters)" };
    const r = await sandbox.exec(["/usr/bin/bc", "-q"], { stdin: `${expr}\n`, env: { BC_LINE_LENGTH: "0" } });
    if (r.timedOut || r.signal || r.exitCode !== 0) return { ok: false, crashed: true, output: `calc crashed (exit ${r.exitCode})` };
    const out = r.stdout.trim();
    if (r.stderr.trim() !== "" || !/^-?\d+$/.test(out)) return { ok: false, output: `calc error: ${r.stderr.trim().split("\n")[0] ?? out}` };
    return { ok: true, output: out };
  },
};

/** The last `Answer: <integer>` of a text. */
function lastAnswer(text: string): number | undefined {
  const all = [...text.matchAll(/Answer:\s*(-?\d+)/g)];
  const last = all[all.length - 1];
  return last ? Number(last[1]) : undefined;
}

/** The environment's factory (the module's default export). */
export default function createShopEnvironment(): Environment {
  return {
    name: "shop",
    tasks: (count: number, seed: number): Task[] => Array.from({ length: count }, (_, i) => shopTask(seed, i)),
    tools: () => [calcTool],
    async setup(task: Task, sandbox: Sandbox) {
      // The question only: the answer is never reachable from inside the sandbox.
      await sandbox.writeFile("task.json", `${JSON.stringify({ id: task.id, question: task.prompt[task.prompt.length - 1]?.content })}\n`);
      return {};
    },
    async check(task: Task, ctx: { finalAnswer: string }) {
      const { answer } = metaOf(task);
      const got = lastAnswer(ctx.finalAnswer);
      if (got === undefined) return { score: 0, detail: `no 'Answer: <integer>' (expected ${answer})` };
      return got === answer ? { score: 1, detail: `correct: ${answer}` } : { score: 0, detail: `wrong: expected ${answer}, got ${got}` };
    },
    golden(task: Task): ChatMessage[] {
      const { expression, answer } = metaOf(task);
      return [
        ...task.prompt,
        { role: "assistant", content: call("calc", expression) },
        { role: "tool", name: "calc", content: String(answer) },
        { role: "assistant", content: `Answer: ${answer}` },
      ];
    },
    async solveGolden(task: Task) {
      return `Answer: ${metaOf(task).answer}`;
    },
  };
}
