// The answer as the client got it, kept in the program's context: an agent sends its tool calls
// back in the next call, and the token path must recognise them there.
import type { GatewayContext } from "./gateway-context.js";
import type { Endpoint } from "./openai-request.js";
import { chatMessage } from "./token-path/token-response.js";

/** Keep a recorded chat call's answer (text, tool calls and reasoning, as the client got them) in its program's context. */
export function rememberAnswer(ctx: GatewayContext, programId: string, endpoint: Endpoint, answer: Parameters<typeof chatMessage>[0]): void {
  const context = ctx.contexts.get(programId);
  if (!context || endpoint !== "chat") return;
  const { message } = chatMessage(answer);
  const calls = message.tool_calls ?? [];
  context.answer = {
    content: message.content ?? "",
    toolCalls: calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    ...(message.reasoning_content !== undefined ? { reasoning: message.reasoning_content } : {}),
  };
}
