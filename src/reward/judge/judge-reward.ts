// The LLM-as-judge reward: a judge model (called through the gateway) reads the task and the
// program's final answer and rates it 0-10 on a `SCORE: <n>` line; the reward is n/10. Unparsable
// answers are retried a bounded number of times, then fail with a clear error.
import { ArborError } from "../../core/errors.js";
import type { ChatMessage } from "../../core/types.js";
import type { RewardContext, RewardFn } from "../reward-fn.js";
import { askParsed } from "./ask-parsed.js";
import type { JudgeChat } from "./gateway-chat.js";

export interface JudgeRewardOptions {
  /** Judge model name, as the gateway's backends know it. */
  model: string;
  /** Extra grading instructions appended to the prompt. */
  rubric?: string;
  /** Attempts per program (default 3, at most 10). */
  maxAttempts?: number;
  /** Token budget of the judge's answer (default 64). */
  maxTokens?: number;
  /** Judge sampling temperature (default 0). */
  temperature?: number;
}

export const JUDGE_SYSTEM_PROMPT = [
  "You are a strict grader. You read a task given to an assistant and the assistant's final answer,",
  "and rate how well the answer solves the task, from 0 (wrong or missing) to 10 (fully correct).",
  "Reply with exactly one line: SCORE: <integer from 0 to 10>",
].join("\n");

/** The judge's conversation for one program. */
export function judgePrompt(ctx: Pick<RewardContext, "task" | "finalAnswer">, rubric?: string): ChatMessage[] {
  const task = ctx.task.prompt.filter((m) => m.role === "user").map((m) => m.content).join("\n\n");
  return [
    { role: "system", content: JUDGE_SYSTEM_PROMPT },
    { role: "user", content: `Task:\n${task}\n\nFinal answer:\n${ctx.finalAnswer || "(no answer)"}\n${rubric ? `\nGrading notes:\n${rubric}\n` : ""}\nReply with SCORE: <0-10>.` },
  ];
}

/** The score in a judge answer (the last `SCORE: n` or `SCORE: n/10`, 0 ≤ n ≤ 10) as n/10; undefined when absent. */
export function parseJudgeScore(text: string): number | undefined {
  let last: number | undefined;
  for (const m of text.matchAll(/\bscore\s*[:=]\s*(\d+(?:\.\d+)?)(?:\s*\/\s*10\b)?/gi)) {
    const n = Number(m[1]);
    last = n >= 0 && n <= 10 ? n / 10 : undefined;
  }
  return last;
}

/** Create the `judge` reward over `chat` (see `createGatewayChat`). */
export function createJudgeReward(chat: JudgeChat, opts: JudgeRewardOptions): RewardFn {
  if (!opts.model) throw new ArborError("reward.judge: options.judge.model is required", "config");
  const maxAttempts = opts.maxAttempts ?? 3;
  const maxTokens = opts.maxTokens ?? 64;
  return {
    name: "judge",
    isAsync: true,
    async compute(ctx: RewardContext): Promise<number> {
      const id = ctx.trajectory.program.id;
      const r = await askParsed(
        chat,
        { model: opts.model, messages: judgePrompt(ctx, opts.rubric), maxTokens, temperature: opts.temperature ?? 0, label: `judge/${id}` },
        parseJudgeScore,
        maxAttempts,
        `(SCORE: 0-10) for program '${id}'`,
      );
      return r.value;
    },
  };
}
