// The calc environment: integer arithmetic questions answered with the sandboxed calc tool. The
// smallest real environment: deterministic tasks, a tool that runs in the sandbox, exact checker.
import { formatToolCall } from "../../model/markup.js";
import { ArborError } from "../../core/errors.js";
import type { ChatMessage } from "../../core/types.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import type { CheckContext, CheckResult, Environment, SetupReport, Task, Tool } from "../env.js";
import { CALC_NATIVE_SYSTEM_PROMPT, calcQuestion, calcTasks } from "./tasks.js";
import { createCalcTool } from "./tool.js";

const ANSWER = /Answer:\s*(-?\d+)(?!\d|\.\d)/g;

function metaOf(task: Task): { expression: string; answer: number } {
  const { expression, answer } = task.meta;
  if (typeof expression !== "string" || typeof answer !== "number" || !Number.isSafeInteger(answer)) {
    throw new ArborError(`calc: task ${task.id} has no valid meta (need expression: string, answer: integer)`, "env");
  }
  return { expression, answer };
}

/** The last `Answer: <integer>` in a text, or undefined. */
export function lastAnswer(text: string): string | undefined {
  let last: string | undefined;
  for (const m of text.matchAll(ANSWER)) last = m[1];
  return last;
}

/** Score a final answer against the task's expected integer. */
export function checkAnswer(task: Task, finalAnswer: string): CheckResult {
  const { answer } = metaOf(task);
  const got = lastAnswer(finalAnswer);
  if (got === undefined) return { score: 0, detail: `no 'Answer: <integer>' found (expected ${answer})` };
  if (BigInt(got) === BigInt(answer)) return { score: 1, detail: `correct: ${answer}` };
  return { score: 0, detail: `wrong: expected ${answer}, got ${got}` };
}

/** Create the calc environment. */
export function createCalcEnvironment(): Environment {
  const tool = createCalcTool();
  return {
    name: "calc",
    nativeSystemPrompt: CALC_NATIVE_SYSTEM_PROMPT,
    tasks: (count: number, seed: number): Task[] => calcTasks(count, seed),
    tools: (): Tool[] => [tool],
    async setup(task: Task, sandbox: Sandbox): Promise<SetupReport> {
      const { expression } = metaOf(task);
      // The question only: the answer must never be reachable from inside the sandbox.
      await sandbox.writeFile("task.json", `${JSON.stringify({ id: task.id, question: calcQuestion(expression) })}\n`);
      return {};
    },
    async check(task: Task, ctx: CheckContext): Promise<CheckResult> {
      return checkAnswer(task, ctx.finalAnswer);
    },
    async solveGolden(task: Task): Promise<string> {
      return `Answer: ${metaOf(task).answer}`;
    },
    golden(task: Task): ChatMessage[] {
      const { expression, answer } = metaOf(task);
      return [
        ...task.prompt.map((m) => ({ ...m })),
        { role: "assistant", content: formatToolCall("calc", expression) },
        { role: "tool", name: "calc", content: String(answer) },
        { role: "assistant", content: `Answer: ${answer}` },
      ];
    },
  };
}
