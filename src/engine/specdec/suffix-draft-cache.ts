// SuffixDecoding's two sources of drafts for an engine (ArcticInference `SuffixDecodingCache`): a tree per
// active request over its own prompt and output so far, and one global tree of past responses (the
// outputs of every request, kept after the request ends until evicted, oldest first). A draft is taken
// from each and the higher score wins, the request's own on a tie; a draft from the request's group
// (group-draft-service.ts) competes in the same way.
import { ArborError, CapacityError } from "../../core/errors.js";
import { bestDraft, draftFromTrie, type Draft, type DraftOptions } from "./suffix-draft.js";
import { DEFAULT_MAX_DEPTH, SuffixTrie } from "./suffix-trie.js";

/** Bounds of a cache. */
export interface SuffixDraftCacheOptions {
  /** Longest substring indexed (default 24). */
  maxDepth?: number;
  /** Active requests at most (default 4096); starting one more is refused. */
  maxActiveRequests?: number;
  /** Tokens (prompt + output) one request's tree holds (default 65536); more is refused. */
  maxRequestTokens?: number;
  /** Responses kept in the global tree, oldest evicted first (default 10000; 0 disables the global tree). */
  maxCachedResponses?: number;
  /** Tokens the global tree holds over all its responses, oldest evicted first (default 2^20). */
  maxCachedTokens?: number;
}

/** Per-request trees and the global tree of responses, with drafting over both. */
export class SuffixDraftCache {
  readonly maxDepth: number;
  private readonly maxActive: number;
  private readonly maxRequestTokens: number;
  private readonly maxCached: number;
  private readonly local = new Map<string, SuffixTrie>();
  private readonly global: SuffixTrie | undefined;
  /** Requests with a response slot in the global tree, oldest first. */
  private readonly cached = new Set<string>();

  constructor(options: SuffixDraftCacheOptions = {}) {
    this.maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
    this.maxActive = options.maxActiveRequests ?? 4096;
    this.maxRequestTokens = options.maxRequestTokens ?? 65536;
    this.maxCached = options.maxCachedResponses ?? 10000;
    if (!(Number.isInteger(this.maxCached) && this.maxCached >= 0)) throw new ArborError(`maxCachedResponses: must be an integer >= 0, got ${this.maxCached}`, "config");
    if (!(Number.isInteger(this.maxActive) && this.maxActive >= 1)) throw new ArborError(`maxActiveRequests: must be an integer >= 1, got ${this.maxActive}`, "config");
    this.global = this.maxCached > 0 ? new SuffixTrie({ maxDepth: this.maxDepth, maxTokens: options.maxCachedTokens ?? 1 << 20 }) : undefined;
  }

  /** Requests started and not stopped. */
  activeRequests(): string[] {
    return [...this.local.keys()];
  }

  /** Requests whose response is in the global tree, oldest first. */
  cachedResponses(): string[] {
    return [...this.cached];
  }

  /**
   * Start a request: its tree gets the prompt, and it gets a fresh response slot in the global tree
   * (replacing an earlier response of the same id; evicting the oldest response at the bound).
   */
  startRequest(requestId: string, promptTokens: readonly number[]): void {
    if (this.local.has(requestId)) throw new ArborError(`requestId: request '${requestId}' is already active`, "invalid_request");
    if (this.local.size >= this.maxActive) throw new CapacityError("suffix draft cache (active requests)", this.maxActive);
    const tree = new SuffixTrie({ maxDepth: this.maxDepth, maxTokens: this.maxRequestTokens });
    tree.append(requestId, promptTokens);
    this.local.set(requestId, tree);
    if (!this.global) return;
    if (this.cached.has(requestId)) this.evictResponse(requestId);
    for (const old of this.cached) {
      if (this.cached.size < this.maxCached) break;
      this.evictResponse(old);
    }
    this.cached.add(requestId);
  }

  /** Append output tokens of an active request to its tree and (while it has a slot) to the global tree. */
  addResponse(requestId: string, tokens: readonly number[]): void {
    const tree = this.local.get(requestId);
    if (!tree) throw new ArborError(`requestId: request '${requestId}' is not active`, "not_found");
    tree.append(requestId, tokens);
    if (!this.global || !this.cached.has(requestId)) return;
    // A response longer than the whole global budget leaves the global tree rather than failing the request.
    if (this.global.length(requestId) + tokens.length > this.global.maxTokens) {
      this.evictResponse(requestId);
      return;
    }
    for (const evicted of this.global.append(requestId, tokens)) this.cached.delete(evicted);
  }

  /** End a request: its own tree goes; its response stays in the global tree until evicted. */
  stopRequest(requestId: string): void {
    if (!this.local.delete(requestId)) throw new ArborError(`requestId: request '${requestId}' is not active`, "not_found");
  }

  /** Remove a request's response from the global tree. */
  evictResponse(requestId: string): void {
    if (!this.cached.delete(requestId)) throw new ArborError(`requestId: no cached response for request '${requestId}'`, "not_found");
    this.global?.remove(requestId);
  }

  /**
   * Draft for an active request: the best of its own tree's draft, `groupDraft` (from its group's
   * shared tree, when the engine has one) and the global tree's, preferred in that order on a tie.
   */
  draft(requestId: string, context: readonly number[], options: DraftOptions = {}, groupDraft?: Draft): Draft {
    const tree = this.local.get(requestId);
    if (!tree) throw new ArborError(`requestId: request '${requestId}' is not active`, "not_found");
    const pattern = context.length > this.maxDepth ? context.slice(context.length - this.maxDepth) : context;
    const drafts = [draftFromTrie(tree, pattern, options)];
    if (groupDraft) drafts.push(groupDraft);
    if (this.global) drafts.push(draftFromTrie(this.global, pattern, options));
    return bestDraft(drafts);
  }
}
