// Checks shared by the token-level adapters: an engine's token ids and logprobs must be whole and
// aligned before they enter a trainable trace; stop tokens are applied where the engine has none.
import { BackendProtocolError, type GenerateRequest, type GenerateResult } from "./backend.js";

/** Whether `x` is a list of token ids (integers >= 0). */
export function isTokenIds(x: unknown): x is number[] {
  return Array.isArray(x) && x.every((t) => Number.isInteger(t) && t >= 0);
}

/** Check the generate request before it leaves (field + reason). */
export function checkGenerateRequest(name: string, url: string, req: GenerateRequest): void {
  const bad = (field: string, why: string) => new BackendProtocolError(name, url, `cannot be sent this request: ${field}: ${why}`);
  if (!isTokenIds(req.promptTokenIds) || req.promptTokenIds.length === 0) throw bad("promptTokenIds", "must be a non-empty list of integers >= 0");
  if (!Number.isInteger(req.maxTokens) || req.maxTokens < 1) throw bad("maxTokens", `must be an integer >= 1, got ${req.maxTokens}`);
  if (!(req.temperature >= 0)) throw bad("temperature", `must be >= 0, got ${req.temperature}`);
  if (req.topP !== undefined && !(req.topP > 0 && req.topP <= 1)) throw bad("topP", `must be in (0, 1], got ${req.topP}`);
  if (req.seed !== undefined && !Number.isInteger(req.seed)) throw bad("seed", `must be an integer, got ${req.seed}`);
  if (req.stopTokenIds !== undefined && !isTokenIds(req.stopTokenIds)) throw bad("stopTokenIds", "must be a list of integers >= 0");
  if (req.logitBias !== undefined) {
    for (const [k, v] of Object.entries(req.logitBias)) if (!/^\d+$/.test(k) || !Number.isFinite(v)) throw bad("logitBias", `must map token ids to finite numbers, got ${JSON.stringify(k)}: ${v}`);
  }
  if (req.repetitionPenalty !== undefined && !(req.repetitionPenalty > 0 && Number.isFinite(req.repetitionPenalty))) throw bad("repetitionPenalty", `must be > 0, got ${req.repetitionPenalty}`);
  if (req.minTokens !== undefined && !(Number.isInteger(req.minTokens) && req.minTokens >= 0 && req.minTokens <= req.maxTokens)) {
    throw bad("minTokens", `must be an integer in [0, maxTokens=${req.maxTokens}], got ${req.minTokens}`);
  }
}

/** The request's controls in vLLM's (and Arbor's engine's) OpenAI field names, for the body. */
export function vllmSamplingFields(req: GenerateRequest): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (req.logitBias !== undefined && Object.keys(req.logitBias).length > 0) out.logit_bias = req.logitBias;
  if (req.repetitionPenalty !== undefined && req.repetitionPenalty !== 1) out.repetition_penalty = req.repetitionPenalty;
  if (req.minTokens) out.min_tokens = req.minTokens;
  if (req.ignoreEos) out.ignore_eos = true;
  return out;
}

/** Validate aligned ids and logprobs (finite numbers <= 0 after the engines' -inf clamps). */
export function checkTokens(name: string, url: string, ids: unknown, logprobs: unknown[], where: string): asserts ids is number[] {
  if (!isTokenIds(ids)) throw new BackendProtocolError(name, url, `returned no output token ids (${where})`);
  if (logprobs.length !== ids.length) {
    throw new BackendProtocolError(name, url, `returned ${logprobs.length} logprobs for ${ids.length} output tokens (${where}; must be one per token)`);
  }
  const bad = logprobs.findIndex((x) => typeof x !== "number" || Number.isNaN(x) || x > 0);
  if (bad >= 0) throw new BackendProtocolError(name, url, `returned an invalid logprob at output token ${bad}: ${String(logprobs[bad])} (${where})`);
}

/**
 * Cut the output after the first stop token, for engines without a stop-token-id field; a no-op
 * when the engine already stopped there. The stop token stays in the output, as in vLLM's token_ids.
 */
export function applyStopTokens(r: GenerateResult, stop: readonly number[] | undefined): GenerateResult {
  if (!stop?.length) return r;
  const set = new Set(stop);
  const at = r.outputTokenIds.findIndex((t) => set.has(t));
  if (at < 0 || at === r.outputTokenIds.length - 1) return at < 0 ? r : { ...r, finishReason: "stop" };
  const cut = { ...r, outputTokenIds: r.outputTokenIds.slice(0, at + 1), logprobs: r.logprobs.slice(0, at + 1), finishReason: "stop" as const };
  return r.tokenPolicyVersions ? { ...cut, tokenPolicyVersions: r.tokenPolicyVersions.slice(0, at + 1) } : cut;
}

/** True for a list of weights versions (integers >= 0), as Arbor's engine sends `token_policy_versions`. */
export function isPolicyVersions(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0);
}
