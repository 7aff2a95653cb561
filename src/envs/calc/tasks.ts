// Deterministic calc tasks: short integer expressions (2-3 operands of + - *, small numbers,
// optional parentheses). Task i depends only on (seed, i), so longer lists extend shorter ones.
import type { ChatMessage } from "../../core/types.js";
import { Rng } from "../../core/rng.js";
import { formatToolCall } from "../../model/markup.js";
import type { Task } from "../env.js";
import { evalExpr } from "./expr.js";

export interface CalcMeta {
  expression: string;
  answer: number;
  [key: string]: unknown;
}

export const CALC_SYSTEM_PROMPT = [
  "You solve arithmetic questions exactly. You have one tool, calc, which evaluates an integer",
  "expression (digits, spaces, + - * / and parentheses; / divides and drops the remainder).",
  "To call it, write the tool call on its own, exactly like this:",
  formatToolCall("calc", "12*7+3"),
  "The result comes back in the next message. Then give the final answer on its own line as",
  "Answer: <number>",
].join("\n");

/** CALC_SYSTEM_PROMPT for models that call tools natively: the tool is declared in the request. */
export const CALC_NATIVE_SYSTEM_PROMPT = [
  "You solve arithmetic questions exactly. You have one tool, calc, which evaluates an integer",
  "expression (digits, spaces, + - * / and parentheses; / divides and drops the remainder).",
  "Call it with the expression as its input. The result comes back in the next message.",
  "Then give the final answer on its own line as",
  "Answer: <number>",
].join("\n");

/** The user message asking for `expression`. */
export function calcQuestion(expression: string): string {
  return `What is ${expression}?`;
}

function operand(rng: Rng, op: string): number {
  return op === "*" ? rng.int(2, 12) : rng.int(1, 30);
}

/** The expression of task `i` for `seed`. */
export function calcExpression(seed: number, i: number): string {
  const rng = new Rng(seed).fork(`calc-${i}`);
  const n = rng.int(2, 3);
  const ops = Array.from({ length: n - 1 }, () => rng.pick(["+", "-", "*"] as const));
  // A number next to a '*' stays small so the answer stays small.
  const nums = Array.from({ length: n }, (_, k) => operand(rng, ops[k - 1] === "*" || ops[k] === "*" ? "*" : "+"));
  const [a, b, c] = nums;
  const [op1, op2] = ops;
  if (n === 2) return `${a}${op1}${b}`;
  switch (rng.int(0, 2)) {
    case 0:
      return `(${a}${op1}${b})${op2}${c}`;
    case 1:
      return `${a}${op1}(${b}${op2}${c})`;
    default:
      return `${a}${op1}${b}${op2}${c}`;
  }
}

/** The initial conversation for a question. */
export function calcPrompt(expression: string): ChatMessage[] {
  return [
    { role: "system", content: CALC_SYSTEM_PROMPT },
    { role: "user", content: calcQuestion(expression) },
  ];
}

/** `count` tasks for `seed`, ids `calc-<seed>-<i>`. */
export function calcTasks(count: number, seed: number): Task[] {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`calc tasks: count must be an integer >= 0, got ${count}`);
  if (!Number.isInteger(seed)) throw new RangeError(`calc tasks: seed must be an integer, got ${seed}`);
  const tasks: Task[] = [];
  for (let i = 0; i < count; i++) {
    const expression = calcExpression(seed, i);
    const meta: CalcMeta = { expression, answer: Number(evalExpr(expression)) };
    tasks.push({ id: `calc-${seed}-${i}`, prompt: calcPrompt(expression), meta });
  }
  return tasks;
}
