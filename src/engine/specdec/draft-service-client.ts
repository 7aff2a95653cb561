// The draft service over HTTP, client side: the DraftService interface against draft-service-routes.ts, so
// an engine uses a shared service exactly as the in-process one. The server's errors come back as
// ArborErrors with its message and code; an unreachable server, or one that does not answer within the
// client's timeout, is an ArborError "draft_service_unreachable" naming the URL (an engine's step waits
// on these calls, so they are bounded).
import { ArborError } from "../../core/errors.js";
import type { DraftService, FetchResult, GroupDraftRequest, RegisterGroupResult, UpdateResult } from "./draft-service.js";
import { DEFAULT_DRAFT_SERVICE_PREFIX } from "./draft-service-routes.js";
import type { Draft } from "./suffix-draft.js";

interface WireFetch {
  cursor: number;
  groups: { group_id: string; created_at: number; sequences: { request_id: string; start: number; tokens: number[] }[]; evicted: string[] }[];
  missing: string[];
}

interface WireDraft {
  token_ids: number[];
  parents: number[];
  probs: number[];
  score: number;
  match_len: number;
}

/** Paths in a draft never exceed its tokens, so "no limit" travels as the largest int32. */
const ALL_PATHS = 0x7fffffff;

/** A call's default time limit (ms): the service answers from memory, so a slow answer means trouble. */
export const DEFAULT_DRAFT_SERVICE_TIMEOUT_MS = 2000;

/** Client of a draft service at `baseUrl` (e.g. `http://127.0.0.1:8000`). */
export class DraftServiceClient implements DraftService {
  private readonly base: string;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, prefix = DEFAULT_DRAFT_SERVICE_PREFIX, opts: { timeoutMs?: number } = {}) {
    this.base = `${baseUrl.replace(/\/+$/, "")}${prefix}`;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_DRAFT_SERVICE_TIMEOUT_MS;
    if (!(Number.isInteger(this.timeoutMs) && this.timeoutMs >= 1)) throw new ArborError(`timeoutMs: must be an integer >= 1, got ${this.timeoutMs}`, "config");
  }

  async registerGroup(groupId: string, ttlMs: number): Promise<RegisterGroupResult> {
    const r = await this.post<{ group_id: string; expires_at: number; evicted_group?: string }>("/groups", { group_id: groupId, ttl_ms: ttlMs });
    return r.evicted_group === undefined ? { groupId: r.group_id, expiresAt: r.expires_at } : { groupId: r.group_id, expiresAt: r.expires_at, evictedGroup: r.evicted_group };
  }

  async update(groupId: string, requestId: string, prevLen: number, newTokens: readonly number[]): Promise<UpdateResult> {
    return this.post<UpdateResult>("/update", { group_id: groupId, request_id: requestId, prev_len: prevLen, new_tokens: newTokens });
  }

  async fetch(groupIds: string[], since: number): Promise<FetchResult> {
    const r = await this.post<WireFetch>("/fetch", { group_ids: groupIds, since });
    return {
      cursor: r.cursor,
      groups: r.groups.map((g) => ({
        groupId: g.group_id,
        createdAt: g.created_at,
        sequences: g.sequences.map((s) => ({ requestId: s.request_id, start: s.start, tokens: s.tokens })),
        evicted: g.evicted,
      })),
      missing: r.missing,
    };
  }

  async draft(request: GroupDraftRequest): Promise<Draft> {
    const r = await this.post<WireDraft>("/draft", {
      group_id: request.groupId,
      context: request.context,
      max_spec_tokens: request.maxSpecTokens,
      max_spec_factor: request.maxSpecFactor,
      max_spec_offset: request.maxSpecOffset,
      min_token_prob: request.minTokenProb,
      top_k: request.topK === Infinity ? ALL_PATHS : request.topK,
    });
    return { tokens: r.token_ids, parents: r.parents, probs: r.probs, score: r.score, matchLen: r.match_len };
  }

  private async post<T>(path: string, body: unknown): Promise<T> {
    const url = `${this.base}${path}`;
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(this.timeoutMs) });
      text = await res.text();
    } catch (e) {
      const err = e as Error & { cause?: { code?: string; message?: string } };
      const why = err.name === "TimeoutError" ? `no answer within ${this.timeoutMs} ms` : (err.cause?.code ?? err.cause?.message ?? err.message);
      throw new ArborError(`draft service: cannot reach ${url}: ${why}`, "draft_service_unreachable");
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ArborError(`draft service: ${url} answered HTTP ${res.status} with a body that is not JSON`, "draft_service");
    }
    if (!res.ok) {
      const err = (json as { error?: { message?: string; code?: string | null } }).error;
      throw new ArborError(err?.message ?? `draft service: ${url} answered HTTP ${res.status}`, err?.code ?? "draft_service");
    }
    return json as T;
  }
}
