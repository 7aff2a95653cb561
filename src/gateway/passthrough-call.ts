// The passthrough's upstream call: the request body goes to the engine as is, bounded by the call
// timeout and the client staying connected.
import type { FastifyReply } from "fastify";
import { BackendUnreachableError, type Backend, type BackendReply } from "../backends/backend.js";
import { boundedCall } from "./client-close.js";
import type { GatewayContext } from "./gateway-context.js";
import type { Endpoint } from "./openai-request.js";

/** Call `backend` once; an unreachable backend leaves rotation, an error answer is returned as is. */
export async function callUpstream(ctx: GatewayContext, backend: Backend, endpoint: Endpoint, body: object, reply: FastifyReply): Promise<BackendReply> {
  const { signal, done } = boundedCall(ctx, backend.name, reply.raw);
  try {
    // An error answer is relayed as is (the engine is alive); only an unreachable one leaves rotation.
    return endpoint === "chat" ? await backend.chatCompletions(body, signal) : await backend.completions(body, signal);
  } catch (e) {
    if (e instanceof BackendUnreachableError) ctx.health.callFailed(backend.name, e.message);
    throw e;
  } finally {
    done();
  }
}
