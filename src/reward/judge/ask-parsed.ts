// Ask a judge model and parse its answer, with a bounded number of attempts: a failed request and
// an unparsable answer both use one attempt; when all are used the error names the model, what was
// asked and the last answer or failure. A judge that never answered (every request failed) is told
// apart (code "judge_unreachable") from one whose answers were unusable (code "judge"): the first says
// nothing about the question asked.
import { ArborError } from "../../core/errors.js";
import type { JudgeChat, JudgeRequest } from "./gateway-chat.js";

export const MAX_JUDGE_ATTEMPTS = 10;

/** The parsed answer and the raw texts of every attempt. */
export interface ParsedAnswer<T> {
  value: T;
  attempts: number;
  raw: string;
}

/**
 * Send `req` until `parse` accepts the answer, at most `maxAttempts` times (1..10). Throws an
 * {@link ArborError} describing `what` when no attempt gave a parsable answer: code "judge_unreachable" when
 * every request failed, "judge" when some answer came back.
 */
export async function askParsed<T>(chat: JudgeChat, req: JudgeRequest, parse: (text: string) => T | undefined, maxAttempts: number, what: string): Promise<ParsedAnswer<T>> {
  if (!(Number.isInteger(maxAttempts) && maxAttempts >= 1 && maxAttempts <= MAX_JUDGE_ATTEMPTS)) {
    throw new ArborError(`judge: maxAttempts must be an integer in 1..${MAX_JUDGE_ATTEMPTS}, got ${maxAttempts}`, "config");
  }
  let last = "";
  let answered = false;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    if (req.signal?.aborted) throw new ArborError(`judge: ${what}: aborted`, "aborted");
    let text: string;
    try {
      text = await chat(req);
    } catch (e) {
      last = `request failed: ${e instanceof Error ? e.message : String(e)}`;
      continue;
    }
    answered = true;
    const value = parse(text);
    if (value !== undefined) return { value, attempts: attempt, raw: text };
    last = `unparsable answer ${JSON.stringify(text.length > 160 ? `${text.slice(0, 160)}…` : text)}`;
  }
  if (!answered) throw new ArborError(`judge model '${req.model}' could not be reached ${what}: ${maxAttempts} attempt(s) failed; last: ${last}`, "judge_unreachable");
  throw new ArborError(`judge model '${req.model}' gave no usable answer ${what} after ${maxAttempts} attempt(s); last: ${last}`, "judge");
}
