// The answer as the client got it, kept in the program's context: an agent sends its tool calls
// back in the next call, and the token path must recognise them there. The answer of a call that
// continued its final message (an assistant prefill) is kept as that whole turn: the prefill, then
// what the model added, as the client sends the turn back.
import type { ChatMessage } from "../core/types.js";
import type { GatewayContext } from "./gateway-context.js";
import type { Endpoint } from "./openai-request.js";
import { chatMessage } from "./token-path/token-response.js";

/**
 * Keep a recorded chat call's answer (text, tool calls and reasoning, as the client got them) in its program's
 * context; `prefill` is the final message the call continued, which the kept answer turn starts with.
 */
export function rememberAnswer(ctx: GatewayContext, programId: string, endpoint: Endpoint, answer: Parameters<typeof chatMessage>[0], prefill?: ChatMessage): void {
  const context = ctx.contexts.get(programId);
  if (!context || endpoint !== "chat") return;
  const { message } = chatMessage(answer);
  const calls = message.tool_calls ?? [];
  const reasoning = prefill?.reasoning !== undefined || message.reasoning_content !== undefined ? (prefill?.reasoning ?? "") + (message.reasoning_content ?? "") : undefined;
  context.answer = {
    content: (prefill?.content ?? "") + (message.content ?? ""),
    toolCalls: calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    ...(reasoning !== undefined ? { reasoning } : {}),
  };
}
