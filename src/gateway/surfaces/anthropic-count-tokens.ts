// POST …/v1/messages/count_tokens: Anthropic's token counting, which Claude-Code-style agents call to manage their
// context window. The request is rendered and tokenized by the serving engine's own chat template and tokenizer,
// as a call's prompt is when tokenized afresh (a program's later call continues its context's ids, which can differ
// from a fresh render by a few tokens). Nothing is generated or recorded and the program's call limits are not
// touched; the caller must still be allowed to call as the program.
import type { FastifyReply } from "fastify";
import { isTokenBackend, type TokenBackend } from "../../backends/backend.js";
import { callerProgram, type ProgramRequest } from "../admit-call.js";
import { boundedCall } from "../client-close.js";
import type { GatewayContext } from "../gateway-context.js";
import { prepareRequest } from "../openai-request.js";
import { promptSource } from "../token-path/prompt-source.js";
import { AnthropicError } from "./anthropic-error.js";
import { anthropicToChat } from "./anthropic-request.js";

/**
 * The fields of a count_tokens request (Anthropic's API refuses others, generation settings included), and Arbor's
 * program_id, which names the program as on the Messages surface.
 */
const COUNT_FIELDS = new Set(["model", "messages", "system", "tools", "tool_choice", "thinking", "program_id"]);

/** Answer a count_tokens request: `{input_tokens}`, or Anthropic's error shape. */
export async function countTokens(ctx: GatewayContext, req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
  let chatBody: ReturnType<typeof anthropicToChat>;
  try {
    chatBody = anthropicToChat(asMessagesRequest(req.body));
  } catch (e) {
    if (e instanceof AnthropicError) return reply.code(e.status).send(e.body);
    throw e;
  }
  const prepared = prepareRequest("chat", chatBody);
  const programId = callerProgram(ctx, req, prepared.bodyProgramId);
  const backend = tokenizingBackend(ctx, programId);
  if (backend === undefined) {
    const e = new AnthropicError(501, "api_error", "count_tokens needs a backend with the engine's tokenizer (type builtin, vllm or llamacpp, or one with backends[].tokenizer); this gateway has none");
    return reply.code(e.status).send(e.body);
  }
  const source = promptSource("chat", prepared);
  if (source.endpoint !== "chat") throw new Error("count_tokens: a chat request's prompt source is its messages");
  // Bounded as a call is (agents count often): the call timeout, and the client staying connected.
  const { signal, done } = boundedCall(ctx, backend.name, reply.raw);
  try {
    const { tokens } = await (backend.tokenize as NonNullable<TokenBackend["tokenize"]>).call(backend, {
      messages: source.messages,
      // A prefill (final assistant message) is counted as the call renders it: its turn left open.
      ...(source.continueFinal ? { addGenerationPrompt: false, continueFinalMessage: true } : { addGenerationPrompt: true }),
      ...(source.tools ? { tools: source.tools } : {}),
      signal,
    });
    return { input_tokens: tokens.length };
  } finally {
    done();
  }
}

/**
 * The count request as a Messages request (which needs max_tokens): fields a count request does not take are
 * refused as Anthropic's API refuses them.
 */
function asMessagesRequest(body: unknown): unknown {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return body;
  const extra = Object.keys(body).find((k) => !COUNT_FIELDS.has(k));
  if (extra !== undefined) throw AnthropicError.invalidRequest(extra, "Extra inputs are not permitted (count_tokens takes model, messages, system, tools, tool_choice, thinking; and program_id)");
  // Above any thinking budget, which must stay below max_tokens.
  return { ...body, max_tokens: Number.MAX_SAFE_INTEGER };
}

/** The program's backend when it has one and it tokenizes, else the first backend that does. */
function tokenizingBackend(ctx: GatewayContext, programId: string): TokenBackend | undefined {
  const own = ctx.backends.get(ctx.table.get(programId)?.backend ?? "");
  if (own !== undefined && isTokenBackend(own) && own.tokenize !== undefined) return own;
  return ctx.backendList.find((b): b is TokenBackend => isTokenBackend(b) && b.tokenize !== undefined);
}
