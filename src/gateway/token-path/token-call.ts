// One non-streaming call on the token path, attempts included: build the token-id prompt on the
// routed backend, generate, decode the answer. A backend that is unreachable, resets or answers
// 5xx before a result is reported and the call is tried once more on another backend with the
// same prompt ids; the caller records only the one attempt that returns.
import {
  BackendHttpError,
  BackendUnreachableError,
  type GenerateRequest,
  type GenerateResult,
  type SamplingControlName,
  type TokenBackend,
} from "../../backends/backend.js";
import { GatewayRejection } from "../auth/auth-errors.js";
import { InvalidRequestError } from "../http-errors.js";
import type { ToolPlan } from "../../model/tool-markup.js";
import { answerPlan, type AnswerPlan } from "./answer-plan.js";
import { buildPrompt, type BuiltPrompt, type ProgramContext, type PromptEngine, type PromptSource } from "./context-prompt.js";
import type { MaxTokensClamp } from "../../core/types.js";
import { reasoningMarkerIds } from "./reasoning-markers.js";
import { fitMaxTokens, type MaxTokensPolicy } from "./max-tokens.js";
import type { TokenSampling } from "./sampling.js";
import { contentTokenIds, type DecodedOutput } from "./token-response.js";
import { tokenTexts } from "./token-texts.js";

/** Attempts per call: the first and one retry (bounded: a failing fleet is not hammered). */
export const MAX_ATTEMPTS = 2;

/** One routed attempt: where it goes and the signal that bounds it (timeout, client gone, backend down). */
export interface Attempt {
  routeId: number;
  backend: TokenBackend;
  signal: AbortSignal;
  /** Release the attempt's timer and listeners. */
  done(): void;
}

export interface TokenCallDeps {
  /** Route attempt `n`, avoiding `failed`; throws (no backend left) when none can take it. */
  route(promptTokenIds: readonly number[] | undefined, failed: readonly string[]): Attempt;
  /** Attempt `routeId` ended: with its result, or failed. */
  finished(routeId: number, outcome: { promptTokenIds: number[]; result: GenerateResult } | undefined): void;
  /** Generate on the routed backend (default `backend.generate`; divided rollout spreads chunks over backends). */
  generate?(backend: TokenBackend, req: GenerateRequest): Promise<GenerateResult>;
  /** The backend failed at the transport level (taken out of rotation). */
  transportFailed(backend: string, cause: string): void;
  /** The call moves from `from` to another backend. */
  retrying(from: string): void;
}

export interface TokenCallInput {
  programId: string;
  /** The program's group, sent to engines that draft from siblings (GenerateRequest.draftGroupId). */
  draftGroupId?: string;
  source: PromptSource;
  previous: ProgramContext | undefined;
  sampling: TokenSampling;
  /** What to do with a max_tokens larger than the context leaves (default clamp). */
  maxTokensPolicy?: MaxTokensPolicy;
  /** A chat request's tool plan and its raw tool_choice (read with the backend's parser). */
  tools?: { plan: ToolPlan; choice: unknown };
}

export interface TokenCallResult {
  backend: TokenBackend;
  promptTokenIds: number[];
  contextReset: boolean;
  /** Why the prompt does not continue the previous context (with contextReset). */
  contextResetReason?: string;
  result: GenerateResult;
  /** The client's max_tokens, clamped to what the context left (absent: served as asked). */
  maxTokensClamped?: MaxTokensClamp;
  /** The client's stops by token id (the answer's stop_reason). */
  stops: ReadonlyMap<number, string | number>;
  decoded: DecodedOutput;
  /** How the answer is read (chat): the parsers of the backend the prompt was built on. */
  answer: AnswerPlan;
  /** The prompt needed the render up to the previous answer (see ProgramContext.answerRenderNeeded). */
  answerRendered?: true;
}

/** A call's prompt, built once on the first backend that takes it, with the answer plan it was built for. */
export type CallPrompt = BuiltPrompt & { answer: AnswerPlan };

/**
 * Build the call's prompt on `backend`: the answer plan of its parsers (chat), a forced call's
 * opening in that parser's format at the end, the program's context continued where it can be.
 */
export async function buildCallPrompt(input: TokenCallInput, backend: TokenBackend, signal: AbortSignal): Promise<CallPrompt> {
  const src = input.source;
  if (src.endpoint !== "chat") return { ...(await buildPrompt(src, input.previous, promptEngine(backend), signal)), answer: {} };
  const answer = answerPlan(backend, input.tools?.plan, input.tools?.choice);
  const markers = answer.reasoning ? await reasoningMarkerIds(backend, signal) : undefined;
  if (markers) answer.reasoningMarkers = markers;
  const source = answer.prefill !== undefined ? { ...src, prefill: answer.prefill } : src;
  return { ...(await buildPrompt(source, input.previous, promptEngine(backend), signal)), answer };
}

/** The backend's tokenizer endpoints for the prompt builder. */
function promptEngine(backend: TokenBackend): PromptEngine {
  const d = backend.detokenize;
  return { tokenize: tokenizer(backend), ...(d ? { detokenize: (ids: number[], signal?: AbortSignal) => d.call(backend, ids, signal) } : {}) };
}

/** Whether an attempt's error means the backend itself failed (worth one try elsewhere). */
export function isTransportFailure(e: unknown): e is BackendUnreachableError | BackendHttpError {
  return e instanceof BackendUnreachableError || (e instanceof BackendHttpError && e.status >= 500);
}

/** Run the call, retrying once on another backend after a transport failure. */
export async function runTokenCall(input: TokenCallInput, deps: TokenCallDeps): Promise<TokenCallResult> {
  const failures: { backend: string; cause: string }[] = [];
  let prompt: CallPrompt | undefined;
  for (;;) {
    const attempt = routeAttempt(deps, prompt?.promptTokenIds, failures);
    const { backend, signal } = attempt;
    let outcome: { promptTokenIds: number[]; result: GenerateResult } | undefined;
    try {
      // The prompt is built once: a retry sends the very same ids (only a failed build is redone).
      prompt ??= await buildCallPrompt(input, backend, signal);
      const { req, clamped, stops } = await generateRequest(backend, input, prompt, signal);
      const result = deps.generate ? await deps.generate(backend, req) : await backend.generate(req);
      outcome = { promptTokenIds: prompt.promptTokenIds, result };
      const decoded = await decode(backend, result, input.sampling.logprobs, signal);
      return {
        backend,
        promptTokenIds: prompt.promptTokenIds,
        contextReset: prompt.contextReset,
        ...(prompt.contextResetReason !== undefined ? { contextResetReason: prompt.contextResetReason } : {}),
        result,
        ...(clamped ? { maxTokensClamped: clamped } : {}),
        stops,
        decoded,
        answer: prompt.answer,
        ...(prompt.answerRendered ? { answerRendered: true } : {}),
      };
    } catch (e) {
      // A failure after the engine produced the answer is not retried: generating again would
      // sample a different answer for the same call.
      if (outcome !== undefined || !isTransportFailure(e)) throw e;
      retryAfter(deps, backend.name, e.message, failures);
    } finally {
      deps.finished(attempt.routeId, outcome);
      attempt.done();
    }
  }
}

/** Route the next attempt; once an attempt failed, a routing failure ends the call as exhausted. */
export function routeAttempt(
  deps: Pick<TokenCallDeps, "route">,
  promptTokenIds: readonly number[] | undefined,
  failures: readonly { backend: string; cause: string }[],
): Attempt {
  try {
    return deps.route(promptTokenIds, failures.map((f) => f.backend));
  } catch (e) {
    if (failures.length === 0) throw e;
    throw exhausted(failures, e instanceof Error ? e.message : String(e));
  }
}

/** Note a transport failure on `backend`; throws when no attempt is left, else reports the retry. */
export function retryAfter(
  deps: Pick<TokenCallDeps, "transportFailed" | "retrying">,
  backend: string,
  cause: string,
  failures: { backend: string; cause: string }[],
): void {
  failures.push({ backend, cause });
  deps.transportFailed(backend, cause);
  if (failures.length >= MAX_ATTEMPTS) throw exhausted(failures);
  deps.retrying(backend);
}

/** The backend's tokenizer, bound (a 400 when it has none). */
export function tokenizer(backend: TokenBackend): NonNullable<TokenBackend["tokenize"]> {
  const t = backend.tokenize;
  if (!t) throw new InvalidRequestError(null, `backend '${backend.name}' has no tokenizer endpoint; the token path cannot serve it`);
  return (req) => t.call(backend, req);
}

/**
 * The generate request of a call whose prompt is built: max_tokens fitted to the context
 * (token-path/max-tokens.ts; `clamped` when it was), stop strings as ids.
 */
export async function generateRequest(
  backend: TokenBackend,
  input: TokenCallInput,
  prompt: { promptTokenIds: number[]; maxModelLen: number | null },
  signal: AbortSignal,
): Promise<{ req: GenerateRequest; clamped?: MaxTokensClamp; stops: Map<number, string | number> }> {
  const s = input.sampling;
  const { maxTokens, clamped } = fitMaxTokens(s.maxTokens, s.maxTokensField, prompt, backend.name, input.maxTokensPolicy ?? "clamp");
  const stopTokenIds = [...s.stopTokenIds];
  // What each stop token stands for in the answer's stop_reason: the client's string, or its id.
  const stops = new Map<number, string | number>(s.stopTokenIds.map((id) => [id, id]));
  for (const [i, text] of s.stop.entries()) {
    const ids = (await tokenizer(backend)({ text, addSpecialTokens: false, signal })).tokens;
    if (ids.length !== 1) {
      throw new InvalidRequestError(
        `${s.stopField}[${i}]`,
        `${JSON.stringify(text)} is ${ids.length} tokens for backend '${backend.name}'; the token path honours stop strings that are one token only`,
      );
    }
    stopTokenIds.push(ids[0] as number);
    stops.set(ids[0] as number, text);
  }
  const controls = samplingControls(backend, s, maxTokens);
  const req: GenerateRequest = {
    promptTokenIds: prompt.promptTokenIds,
    maxTokens,
    temperature: s.temperature,
    ...(s.topP !== undefined ? { topP: s.topP } : {}),
    ...(s.seed !== undefined ? { seed: s.seed } : {}),
    ...(stopTokenIds.length > 0 ? { stopTokenIds } : {}),
    ...controls,
    programId: input.programId,
    ...(input.draftGroupId !== undefined ? { draftGroupId: input.draftGroupId } : {}),
    signal,
  };
  return clamped ? { req, clamped, stops } : { req, stops };
}

const CONTROL_FIELDS: Record<SamplingControlName, string> = {
  logitBias: "logit_bias",
  repetitionPenalty: "repetition_penalty",
  minTokens: "min_tokens",
  ignoreEos: "ignore_eos",
};

/**
 * The call's vLLM sampling controls for `backend`: a control the backend does not carry with vLLM's
 * semantics is refused (400 naming the field), never dropped. `maxTokens` is the resolved budget.
 */
function samplingControls(backend: TokenBackend, s: TokenCallInput["sampling"], maxTokens: number): Partial<GenerateRequest> {
  const out: Partial<GenerateRequest> = {};
  if (s.logitBias !== undefined) out.logitBias = s.logitBias;
  if (s.repetitionPenalty !== undefined) out.repetitionPenalty = s.repetitionPenalty;
  if (s.minTokens !== undefined) {
    if (s.minTokens > maxTokens) throw new InvalidRequestError("min_tokens", `must be less than or equal to max_tokens=${maxTokens}, got ${s.minTokens}`);
    out.minTokens = s.minTokens;
  }
  if (s.ignoreEos !== undefined) out.ignoreEos = s.ignoreEos;
  const carried = new Set(backend.samplingControls ?? []);
  for (const name of Object.keys(out) as SamplingControlName[]) {
    if (!carried.has(name)) {
      throw new InvalidRequestError(CONTROL_FIELDS[name], `backend '${backend.name}' (${backend.type}) cannot honour it; the gateway refuses it rather than ignore it`);
    }
  }
  return out;
}

async function decode(backend: TokenBackend, result: GenerateResult, logprobs: boolean, signal: AbortSignal): Promise<DecodedOutput> {
  const detok = backend.detokenize;
  if (!detok) throw new InvalidRequestError(null, `backend '${backend.name}' has no detokenizer endpoint; the token path cannot serve it`);
  const content = contentTokenIds(result);
  const text = content.length > 0 ? await detok.call(backend, content, signal) : "";
  if (!logprobs) return { text };
  return { text, tokenTexts: await tokenTexts(result.outputTokenIds, (ids, s) => detok.call(backend, ids, s), signal) };
}

/** The rejection after every attempt failed (or no backend could take the retry). */
export function exhausted(failures: readonly { backend: string; cause: string }[], noRetry?: string): GatewayRejection {
  const what = failures.map((f) => `backend '${f.backend}' failed: ${f.cause}`).join("; ");
  if (noRetry !== undefined) {
    return new GatewayRejection(503, "server_error", "backend_unavailable", `${what}; no other backend could take the retry (${noRetry})`);
  }
  return new GatewayRejection(502, "server_error", "backend_failed", `the call failed on ${failures.length} backends: ${what}`);
}
