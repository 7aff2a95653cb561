// The built-in engine's speculative decoding setting (`speculative` on a scheduled llama.cpp engine):
// which drafter, how many draft tokens a step verifies, and the drafter's knobs. Off when absent.
import { ArborError } from "../../core/errors.js";
import type { DraftOptions } from "./suffix-draft.js";
import type { SuffixDraftCacheOptions } from "./suffix-draft-cache.js";

export interface SpeculativeOptions {
  /**
   * The drafter: "suffix" (SuffixDecoding: per-request trees and the global tree of past responses), or
   * "draft-model" (greedy proposals of a small GGUF with the policy's vocabulary, draft-model.ts).
   */
  method: "suffix" | "draft-model";
  /**
   * "draft-model": the draft's GGUF when no `draft-vN.gguf` lies beside the served `policy-vN.gguf` (a run's
   * weight syncs serve the draft distilled from each version; model/draft-model-path.ts).
   */
  draftModel?: string;
  /** Draft tokens verified per step at most (default 8). */
  maxSpecTokens?: number;
  /** SuffixDecoding's pruning threshold on a draft token's estimated probability (default 0.1). */
  minTokenProb?: number;
  /** Draft at most matchLen × maxSpecFactor + maxSpecOffset tokens (defaults 1 and 0). */
  maxSpecFactor?: number;
  maxSpecOffset?: number;
  /** Responses kept in the global tree (default 10000; 0: per-request trees only). */
  maxCachedResponses?: number;
  /**
   * Seer's adaptive budget (default true): draft tokens per step chosen from the measured step time and
   * acceptance to maximise tokens per second, so a large batch stops speculating (draft-budget.ts).
   */
  adaptive?: boolean;
  /**
   * "suffix": a draft service shared with other engines (another engine's `/v1/specdec`, draft-service-routes.ts):
   * the engine sends its grouped requests' tokens there and drafts from local copies of their groups, so
   * siblings placed on different engines draft each other (shared-group-drafts.ts). Absent: the engine's
   * own group trees only. When the service cannot be reached, steps draft from the engine's own trees.
   */
  draftService?: { url: string; timeoutMs?: number };
}

export const DEFAULT_MAX_SPEC_TOKENS = 8;

/** A checked speculative setting, split for the drafter. */
export interface ResolvedSpeculative {
  method: SpeculativeOptions["method"];
  draft: DraftOptions;
  cache: SuffixDraftCacheOptions;
  adaptive: boolean;
  /** "draft-model": the configured draft GGUF (absent: only the one beside the policy checkpoint). */
  draftModel?: string;
  /** "suffix": the shared draft service (absent: the engine's own group trees only). */
  draftService?: { url: string; timeoutMs?: number };
}

/** Check a speculative setting (ArborError "config" naming the field) and split it for the drafter. */
export function resolveSpeculative(s: SpeculativeOptions): ResolvedSpeculative {
  if (typeof s !== "object" || s === null) throw new ArborError("speculative: must be an object with a method", "config");
  if (s.method !== "suffix" && s.method !== "draft-model") throw new ArborError(`speculative.method: must be "suffix" or "draft-model", got ${JSON.stringify(s.method)}`, "config");
  if (s.draftModel !== undefined && (typeof s.draftModel !== "string" || s.draftModel === "")) throw new ArborError(`speculative.draftModel: must be a GGUF path, got ${JSON.stringify(s.draftModel)}`, "config");
  if (s.draftModel !== undefined && s.method !== "draft-model") throw new ArborError('speculative.draftModel: only with method "draft-model"', "config");
  const int = (field: string, v: number | undefined, min: number): void => {
    if (v !== undefined && !(Number.isInteger(v) && v >= min)) throw new ArborError(`speculative.${field}: must be an integer >= ${min}, got ${String(v)}`, "config");
  };
  const num = (field: string, v: number | undefined, ok: (x: number) => boolean, what: string): void => {
    if (v !== undefined && !(typeof v === "number" && Number.isFinite(v) && ok(v))) throw new ArborError(`speculative.${field}: must be ${what}, got ${String(v)}`, "config");
  };
  int("maxSpecTokens", s.maxSpecTokens, 1);
  int("maxCachedResponses", s.maxCachedResponses, 0);
  num("minTokenProb", s.minTokenProb, (x) => x >= 0 && x <= 1, "a number in [0, 1]");
  num("maxSpecFactor", s.maxSpecFactor, (x) => x >= 0, "a number >= 0");
  num("maxSpecOffset", s.maxSpecOffset, () => true, "a finite number");
  if (s.adaptive !== undefined && typeof s.adaptive !== "boolean") throw new ArborError(`speculative.adaptive: must be true or false, got ${JSON.stringify(s.adaptive)}`, "config");
  const ds = s.draftService;
  if (ds !== undefined) {
    if (s.method !== "suffix") throw new ArborError('speculative.draftService: only with method "suffix"', "config");
    if (typeof ds !== "object" || ds === null || typeof ds.url !== "string" || !/^https?:\/\/[^/]/.test(ds.url)) {
      throw new ArborError(`speculative.draftService.url: must be an http(s) base URL such as http://127.0.0.1:8001, got ${JSON.stringify((ds as { url?: unknown } | null)?.url)}`, "config");
    }
    int("draftService.timeoutMs", ds.timeoutMs, 1);
  }
  const draft: DraftOptions = { maxSpecTokens: s.maxSpecTokens ?? DEFAULT_MAX_SPEC_TOKENS };
  if (s.minTokenProb !== undefined) draft.minTokenProb = s.minTokenProb;
  if (s.maxSpecFactor !== undefined) draft.maxSpecFactor = s.maxSpecFactor;
  if (s.maxSpecOffset !== undefined) draft.maxSpecOffset = s.maxSpecOffset;
  return {
    method: s.method,
    draft,
    cache: s.maxCachedResponses !== undefined ? { maxCachedResponses: s.maxCachedResponses } : {},
    adaptive: s.adaptive ?? true,
    ...(s.draftModel !== undefined ? { draftModel: s.draftModel } : {}),
    ...(ds !== undefined ? { draftService: { url: ds.url, ...(ds.timeoutMs !== undefined ? { timeoutMs: ds.timeoutMs } : {}) } } : {}),
  };
}
