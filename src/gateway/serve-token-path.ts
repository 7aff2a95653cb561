// A non-streamed call on the token path (token-path/): the gateway builds the token-id prompt from
// the program's context, generates (retrying once elsewhere after a transport failure), and records
// exactly the ids and logprobs the engine produced under a call id fixed up front.
import { BackendHttpError, type GenerateRequest, type TokenBackend } from "../backends/backend.js";
import { inClientTerms } from "./client-fields.js";
import type { GatewayContext } from "./gateway-context.js";
import { openAiError, openAiErrorType } from "./http-errors.js";
import { prefillOf } from "./openai-request.js";
import { recordCall, tokenPathFlags } from "./record-call.js";
import { rememberAnswer } from "./remember-answer.js";
import { usesTokenPath } from "./token-path-choice.js";
import { promptSource } from "./token-path/prompt-source.js";
import { runTokenCall, type TokenCallInput } from "./token-path/token-call.js";
import type { TokenSampling } from "./token-path/sampling.js";
import type { ToolPlan } from "../model/tool-markup.js";
import { tokenAnswer } from "./token-path/token-response.js";
import { tokenRouting, type RoutedTokenCall } from "./token-routing.js";
import { tokenVersionsOf, type ExtractedTrace } from "./trace-extract.js";

/** A routed call's input to the token path: its prompt source, the program's context and group, the plan's sampling and tools. */
export function tokenCallInput(ctx: GatewayContext, call: RoutedTokenCall, plan: { sampling: TokenSampling; tools?: ToolPlan | undefined }): TokenCallInput {
  const { programId } = call.place;
  const groupId = ctx.table.get(programId)?.groupId;
  return {
    programId,
    ...(groupId !== undefined ? { draftGroupId: groupId } : {}),
    source: promptSource(call.endpoint, call.prepared),
    previous: ctx.contexts.get(programId),
    sampling: plan.sampling,
    maxTokensPolicy: ctx.maxTokensPolicy,
    ...(plan.tools ? { tools: { plan: plan.tools, choice: call.prepared.upstreamBody.tool_choice } } : {}),
  };
}

/** Serve a call routed to `call.first` on the token path; `recorded` says whether a Call was recorded. */
export async function serveTokenPath(ctx: GatewayContext, call: RoutedTokenCall): Promise<{ recorded: boolean; result: unknown }> {
  const { endpoint, prepared, place, reply } = call;
  const { programId, index } = place;
  const callId = ctx.newCallId();
  const routing = tokenRouting(ctx, call, (b) => usesTokenPath(ctx, b, prepared));
  const divided = ctx.divided;
  try {
    const plan = routing.plan(endpoint);
    const { sampling } = plan;
    const out = await runTokenCall(
      tokenCallInput(ctx, call, plan),
      {
        ...routing.deps,
        finished: (routeId, o) =>
          ctx.router.onFinished(routeId, o ? { promptTokens: o.promptTokenIds, outputTokens: o.result.outputTokenIds, ok: true } : { outputTokens: 0, ok: false }),
        ...(divided ? { generate: (_backend: TokenBackend, req: GenerateRequest) => divided.generate(req) } : {}),
      },
    );
    const trace: ExtractedTrace = {
      promptTokenIds: out.promptTokenIds,
      outputTokenIds: out.result.outputTokenIds,
      logprobs: out.result.logprobs,
      outputText: out.decoded.text,
      finishReason: out.result.finishReason,
      // Engines that report no weights version (vLLM, SGLang, llama-server) record version 0.
      policyVersion: out.result.policyVersion ?? 0,
      ...tokenVersionsOf(out.result.tokenPolicyVersions, out.result.policyVersion ?? 0),
    };
    const recorded = recordCall(ctx, trace, callId, out.backend, prepared, place, tokenPathFlags(out));
    rememberAnswer(ctx, programId, endpoint, { callId, result: out.result, decoded: out.decoded, answer: out.answer }, prefillOf(prepared));
    const context = ctx.contexts.get(programId);
    if (context && out.answerRendered) context.answerRenderNeeded = true;
    reply.header("x-arbor-call-id", recorded.id).header("x-arbor-call-index", String(index));
    const answer = tokenAnswer({
      endpoint,
      callId,
      created: Math.floor(ctx.clock.now() / 1000),
      model: sampling.model,
      promptTokenIds: out.promptTokenIds,
      result: out.result,
      decoded: out.decoded,
      logprobs: sampling.logprobs,
      answer: out.answer,
      stops: out.stops,
    });
    return { recorded: true, result: answer };
  } catch (e) {
    // The engine refused the request itself (a 4xx): the client gets its answer, naming the client's fields.
    if (e instanceof BackendHttpError && e.status < 500) {
      const body = e.body !== undefined ? inClientTerms(e.body, endpoint, prepared.clientNames) : undefined;
      return { recorded: false, result: reply.code(e.status).send(body ?? openAiError(e.message, openAiErrorType(e.status), null, "upstream_error")) };
    }
    throw e;
  } finally {
    routing.close();
  }
}
