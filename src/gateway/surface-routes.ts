// The surface routes: Anthropic Messages and OpenAI Responses, served through the chat path (the
// request translated to a chat completion, recorded like one, and the answer translated back).
import type { FastifyReply } from "fastify";
import { admitted, type ProgramRequest } from "./admit-call.js";
import type { GatewayContext } from "./gateway-context.js";
import { prepareRequest } from "./openai-request.js";
import { serveCall } from "./serve-call.js";
import { AnthropicError } from "./surfaces/anthropic-error.js";
import { translateAnthropic } from "./surfaces/anthropic-request.js";
import { chatToAnthropic } from "./surfaces/anthropic-response.js";
import { anthropicStreamSurface } from "./surfaces/anthropic-stream-surface.js";
import { responsesToChat } from "./surfaces/responses-request.js";
import { chatToResponse } from "./surfaces/responses-response.js";
import { responsesStreamSurface } from "./surfaces/responses-stream.js";

type RouteHandler = (req: ProgramRequest, reply: FastifyReply) => Promise<unknown>;

/** The handlers of POST .../v1/messages and POST .../v1/responses. */
export function surfaceRoutes(ctx: GatewayContext): { messages: RouteHandler; responses: RouteHandler } {
  /**
   * Anthropic Messages (what Claude-Code-style agents speak); streamed answers are relayed as
   * Anthropic's message events.
   */
  async function messages(req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
    const start = ctx.clock.now();
    let translated: ReturnType<typeof translateAnthropic>;
    try {
      translated = translateAnthropic(req.body);
    } catch (e) {
      if (e instanceof AnthropicError) return reply.code(e.status).send(e.body);
      throw e;
    }
    const { chat: chatBody, messageFields } = translated;
    const prepared = prepareRequest("chat", chatBody);
    // An engine's refusal names Anthropic's fields, in its dotted paths.
    prepared.clientNames = { stop: "stop_sequences", messageFields };
    if (prepared.stream) ctx.streamSurfaces.set(prepared, () => anthropicStreamSurface(chatBody.model));
    return admitted(ctx, req, prepared, async (programId) => {
      const result = await serveCall(ctx, { endpoint: "chat", prepared, programId, start, reply, surface: "messages" });
      // An upstream error was already sent as is.
      if (reply.sent) return reply;
      try {
        return chatToAnthropic(result as Parameters<typeof chatToAnthropic>[0], chatBody.model);
      } catch (e) {
        if (e instanceof AnthropicError) return reply.code(e.status).send(e.body);
        throw e;
      }
    });
  }

  /** OpenAI Responses (the OpenAI Agents SDK's default API); streamed answers are relayed as Responses events. */
  async function responses(req: ProgramRequest, reply: FastifyReply): Promise<unknown> {
    const start = ctx.clock.now();
    const { chat, echo, messageFields } = responsesToChat(req.body);
    const prepared = prepareRequest("chat", chat);
    prepared.clientNames = { max_tokens: "max_output_tokens", messages: "input", messageFields };
    if (prepared.stream) {
      ctx.streamSurfaces.set(prepared, (backend, callId) =>
        responsesStreamSurface(echo, Math.floor(ctx.clock.now() / 1000), callId, { backend: backend.name, url: backend.url }),
      );
    }
    return admitted(ctx, req, prepared, async (programId) => {
      const result = await serveCall(ctx, { endpoint: "chat", prepared, programId, start, reply, surface: "responses" });
      if (reply.sent) return reply;
      const backend = ctx.backends.get(ctx.table.get(programId)?.backend ?? "");
      const callId = String(reply.getHeader("x-arbor-call-id") ?? "");
      return chatToResponse(result as Parameters<typeof chatToResponse>[0], echo, Math.floor(ctx.clock.now() / 1000), callId, {
        backend: backend?.name ?? "upstream",
        url: backend?.url ?? "",
      });
    });
  }

  return { messages, responses };
}
