// Reads the token trace out of a vLLM-shaped answer (chat: top-level prompt_token_ids and
// choices[0].token_ids; completions: both on the choice) and hides logprobs from clients that
// did not ask for them.
import { isPolicyVersions } from "../backends/token-result.js";
import type { FinishReason } from "../core/types.js";
import type { Endpoint } from "./openai-request.js";

export interface ExtractedTrace {
  promptTokenIds: number[];
  outputTokenIds: number[];
  logprobs: number[];
  outputText: string;
  finishReason: FinishReason;
  policyVersion: number;
  /** The weights version of each output token where they differ from policyVersion (see Call.tokenPolicyVersions). */
  tokenPolicyVersions?: number[];
}

/**
 * The per-token versions of a token-path result as a call records them: null entries (no version
 * known) count as `policyVersion`, and a list saying nothing more than `policyVersion` is dropped.
 */
export function tokenVersionsOf(versions: readonly (number | null)[] | undefined, policyVersion: number): { tokenPolicyVersions?: number[] } {
  if (!versions) return {};
  const list = versions.map((v) => v ?? policyVersion);
  return list.some((v) => v !== policyVersion) ? { tokenPolicyVersions: list } : {};
}

/** Why an answer cannot be traced (worded to follow "backend 'x' at url ..."). */
export class TraceShapeError extends Error {}

/** Extract the trace of choice 0; throws {@link TraceShapeError} naming the missing field. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function extractTrace(endpoint: Endpoint, json: any): ExtractedTrace {
  const choice = Array.isArray(json?.choices) ? json.choices[0] : undefined;
  if (typeof choice !== "object" || choice === null) throw new TraceShapeError("returned no choices[0]");
  const outputTokenIds = choice.token_ids;
  if (!isTokenIds(outputTokenIds)) {
    throw new TraceShapeError(
      "returned no choices[0].token_ids; Arbor needs an engine that honours return_token_ids (the built-in engine, vLLM >= 0.10.2)",
    );
  }
  const promptTokenIds = endpoint === "chat" ? (json.prompt_token_ids ?? choice.prompt_token_ids) : (choice.prompt_token_ids ?? json.prompt_token_ids);

  let logprobs: unknown[];
  let outputText: unknown;
  if (endpoint === "chat") {
    const content = choice.logprobs?.content;
    if (!Array.isArray(content)) throw new TraceShapeError("returned no choices[0].logprobs.content");
    logprobs = content.map((c: { logprob?: unknown } | null) => c?.logprob);
    outputText = choice.message?.content ?? "";
  } else {
    const lp = choice.logprobs?.token_logprobs;
    if (!Array.isArray(lp)) throw new TraceShapeError("returned no choices[0].logprobs.token_logprobs");
    logprobs = lp;
    outputText = choice.text;
  }
  const trace = validateTrace({
    promptTokenIds,
    outputTokenIds,
    logprobs,
    outputText,
    finishReason: finishReasonOf(choice.finish_reason),
    policyVersion: json.policy_version,
  });
  // Arbor's engine: which weights made each token (they differ after an in_flight resume).
  const versions: unknown = choice.token_policy_versions;
  if (versions === undefined || versions === null) return trace;
  if (!isPolicyVersions(versions) || versions.length !== outputTokenIds.length) {
    throw new TraceShapeError(`returned choices[0].token_policy_versions that is not one integer >= 0 per output token (${outputTokenIds.length})`);
  }
  return { ...trace, ...tokenVersionsOf(versions, trace.policyVersion) };
}

/** Check the parts of a trace (from one answer or a whole stream); throws {@link TraceShapeError}. */
export function validateTrace(t: {
  promptTokenIds: unknown;
  outputTokenIds: number[];
  logprobs: unknown[];
  outputText: unknown;
  finishReason: FinishReason;
  policyVersion: unknown;
}): ExtractedTrace {
  const { promptTokenIds, outputTokenIds, logprobs, outputText, policyVersion } = t;
  if (!isTokenIds(promptTokenIds)) throw new TraceShapeError("returned no prompt_token_ids");
  if (logprobs.length !== outputTokenIds.length) {
    throw new TraceShapeError(
      `returned ${logprobs.length} logprobs for ${outputTokenIds.length} output tokens (must be one per token)`,
    );
  }
  const bad = logprobs.findIndex((x) => typeof x !== "number" || Number.isNaN(x) || x > 0);
  if (bad >= 0) throw new TraceShapeError(`returned an invalid logprob at output token ${bad}: ${String(logprobs[bad])}`);
  if (typeof outputText !== "string") throw new TraceShapeError("returned no output text");
  if (!(typeof policyVersion === "number" && Number.isInteger(policyVersion) && policyVersion >= 0)) {
    throw new TraceShapeError("returned no policy_version (an integer >= 0)");
  }
  return { promptTokenIds, outputTokenIds, logprobs: logprobs as number[], outputText, finishReason: t.finishReason, policyVersion };
}

/** Drop logprobs from every choice, so a client that did not ask sees a plain OpenAI answer. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function withoutLogprobs(json: any): any {
  if (!Array.isArray(json?.choices)) return json;
  return { ...json, choices: json.choices.map((c: object) => ({ ...c, logprobs: null })) };
}

function isTokenIds(x: unknown): x is number[] {
  return Array.isArray(x) && x.every((t) => Number.isInteger(t) && t >= 0);
}

/** Map an OpenAI finish reason to the trace's: "tool_calls"/"content_filter" still end the turn normally. */
export function finishReasonOf(raw: unknown): FinishReason {
  if (raw === "length" || raw === "abort" || raw === "error") return raw;
  return "stop";
}
