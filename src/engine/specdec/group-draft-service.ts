// Seer's grouped draft service (DGDS) in process: one suffix trie per group of sibling requests (the n
// responses to one prompt), fed incrementally by every engine with `update(group, request, prevLen,
// newTokens)`, read back incrementally with `fetch(groups, since)` and drafted from with `draft`. An
// I/O-free state machine on an injected Clock: groups expire `ttlMs` after their last registration or
// update (checked on every call), and everything is bounded — groups and tokens over all groups (least
// recently used groups evicted), sequences and tokens per group (oldest sequences evicted), evicted
// sequences remembered (so their engines' later updates are accepted and dropped) up to a bound.
//
// Cursors: every update that adds tokens (or evicts) takes the next number of one service-wide counter
// and each token remembers the number it arrived with, so `fetch(groups, since)` returns exactly the
// tokens numbered after `since` — per sequence a tail, found by binary search — and the current number
// as the caller's next cursor.
import type { Clock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import type { DraftService, FetchResult, GroupDelta, GroupDraftRequest, RegisterGroupResult, UpdateResult } from "./draft-service.js";
import { draftFromTrie, type Draft } from "./suffix-draft.js";
import { checkTokens, DEFAULT_MAX_DEPTH, SuffixTrie } from "./suffix-trie.js";

/** Bounds of the service. */
export interface GroupDraftServiceOptions {
  clock: Clock;
  /** Groups at most; registering one more evicts the least recently used (default 1024). */
  maxGroups?: number;
  /** Sequences per group; a new one evicts the group's oldest (default 64). */
  maxSequencesPerGroup?: number;
  /** Tokens per group over its sequences; oldest sequences are evicted to stay within (default 2^18). */
  maxTokensPerGroup?: number;
  /**
   * Tokens over all groups (default 2^20, at least maxTokensPerGroup): after an update the least recently
   * used other groups are evicted until the total is within. Memory is about maxTokens × maxDepth trie nodes at worst.
   */
  maxTokens?: number;
  /** Longest substring indexed (default 24). */
  maxDepth?: number;
  /** Longest TTL a group may ask for (default one day). */
  maxTtlMs?: number;
}

interface Tombstone {
  /** Length the sequence has reached (its engine keeps sending). */
  length: number;
  /** Cursor number of the eviction. */
  at: number;
}

interface Group {
  ttlMs: number;
  expiresAt: number;
  createdAt: number;
  trie: SuffixTrie;
  /** Per live sequence, the cursor number each token arrived with (non-decreasing). */
  stamps: Map<string, number[]>;
  /** Evicted sequences, oldest first. */
  tombstones: Map<string, Tombstone>;
}

function nonEmptyId(value: unknown, field: string): string {
  if (typeof value !== "string" || value.length === 0) throw new ArborError(`${field}: must be a non-empty string`, "invalid_request");
  if (value.length > 256) throw new ArborError(`${field}: must be at most 256 characters, got ${value.length}`, "invalid_request");
  return value;
}

function intAtLeast(value: unknown, min: number, field: string): number {
  if (!(typeof value === "number" && Number.isInteger(value) && value >= min)) throw new ArborError(`${field}: must be an integer >= ${min}, got ${String(value)}`, "invalid_request");
  return value;
}

/** Index of the first stamp greater than `since` (stamps.length when none is). */
function firstAfter(stamps: readonly number[], since: number): number {
  let lo = 0;
  let hi = stamps.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((stamps[mid] as number) > since) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The in-process draft service. */
export class GroupDraftService implements DraftService {
  private readonly clock: Clock;
  readonly maxGroups: number;
  readonly maxSequencesPerGroup: number;
  readonly maxTokensPerGroup: number;
  readonly maxTokens: number;
  readonly maxDepth: number;
  readonly maxTtlMs: number;
  /** Map order is recency order: the first group is the least recently used. */
  private readonly groups = new Map<string, Group>();
  private version = 0;
  /** Tokens held over all groups. */
  private tokens = 0;

  constructor(options: GroupDraftServiceOptions) {
    this.clock = options.clock;
    const bound = (v: number | undefined, d: number, field: string): number => {
      const x = v ?? d;
      if (!(Number.isInteger(x) && x >= 1)) throw new ArborError(`${field}: must be an integer >= 1, got ${x}`, "config");
      return x;
    };
    this.maxGroups = bound(options.maxGroups, 1024, "maxGroups");
    this.maxSequencesPerGroup = bound(options.maxSequencesPerGroup, 64, "maxSequencesPerGroup");
    this.maxTokensPerGroup = bound(options.maxTokensPerGroup, 1 << 18, "maxTokensPerGroup");
    this.maxTokens = bound(options.maxTokens, Math.max(1 << 20, this.maxTokensPerGroup), "maxTokens");
    if (this.maxTokens < this.maxTokensPerGroup) {
      throw new ArborError(`maxTokens: must be at least maxTokensPerGroup (${this.maxTokensPerGroup}), got ${this.maxTokens}`, "config");
    }
    this.maxDepth = bound(options.maxDepth, DEFAULT_MAX_DEPTH, "maxDepth");
    this.maxTtlMs = bound(options.maxTtlMs, 86_400_000, "maxTtlMs");
  }

  /** The current cursor (what a fetch now would return). */
  get cursor(): number {
    return this.version;
  }

  /** Live group ids, least recently used first. */
  groupIds(): string[] {
    this.expire();
    return [...this.groups.keys()];
  }

  /** The group's live sequences and their tokens (for inspection and tests). */
  sequences(groupId: string): Map<string, readonly number[]> {
    const g = this.live(groupId);
    return new Map(g.trie.sequenceIds().map((id) => [id, g.trie.tokensOf(id)]));
  }

  registerGroup(groupId: string, ttlMs: number): RegisterGroupResult {
    nonEmptyId(groupId, "groupId");
    intAtLeast(ttlMs, 1, "ttlMs");
    if (ttlMs > this.maxTtlMs) throw new ArborError(`ttlMs: must be at most ${this.maxTtlMs} (maxTtlMs), got ${ttlMs}`, "invalid_request");
    this.expire();
    const now = this.clock.now();
    const existing = this.groups.get(groupId);
    if (existing) {
      existing.ttlMs = ttlMs;
      existing.expiresAt = now + ttlMs;
      this.touch(groupId, existing);
      return { groupId, expiresAt: existing.expiresAt };
    }
    let evictedGroup: string | undefined;
    if (this.groups.size >= this.maxGroups) {
      evictedGroup = this.groups.keys().next().value as string;
      this.drop(evictedGroup);
    }
    const group: Group = {
      ttlMs,
      expiresAt: now + ttlMs,
      createdAt: ++this.version,
      trie: new SuffixTrie({ maxDepth: this.maxDepth, maxTokens: this.maxTokensPerGroup }),
      stamps: new Map(),
      tombstones: new Map(),
    };
    this.groups.set(groupId, group);
    return evictedGroup === undefined ? { groupId, expiresAt: group.expiresAt } : { groupId, expiresAt: group.expiresAt, evictedGroup };
  }

  update(groupId: string, requestId: string, prevLen: number, newTokens: readonly number[]): UpdateResult {
    nonEmptyId(groupId, "groupId");
    nonEmptyId(requestId, "requestId");
    intAtLeast(prevLen, 0, "prevLen");
    checkTokens(newTokens, "newTokens");
    const g = this.live(groupId);
    g.expiresAt = this.clock.now() + g.ttlMs;

    const tomb = g.tombstones.get(requestId);
    if (tomb) {
      // Evicted: the engine still reports its tokens; keep the length so gaps are still caught, drop the tokens.
      if (prevLen > tomb.length) throw this.gap(groupId, requestId, prevLen, tomb.length);
      tomb.length = Math.max(tomb.length, prevLen + newTokens.length);
      return { length: tomb.length, appended: 0, evicted: [] };
    }

    const held = g.trie.tokensOf(requestId);
    const cur = held.length;
    if (prevLen > cur) throw this.gap(groupId, requestId, prevLen, cur);
    const overlap = Math.min(cur - prevLen, newTokens.length);
    for (let i = 0; i < overlap; i++) {
      if (held[prevLen + i] !== newTokens[i]) {
        throw new ArborError(
          `newTokens[${i}]: token ${newTokens[i]} differs from token ${held[prevLen + i]} already recorded at position ${prevLen + i} of request '${requestId}' in group '${groupId}' (sequences are append-only)`,
          "conflict",
        );
      }
    }
    const fresh = newTokens.slice(overlap);
    if (fresh.length === 0) return { length: cur, appended: 0, evicted: [] };
    if (cur + fresh.length > this.maxTokensPerGroup) {
      throw new ArborError(
        `newTokens: request '${requestId}' in group '${groupId}' would hold ${cur + fresh.length} tokens, over the group's budget of ${this.maxTokensPerGroup} (maxTokensPerGroup)`,
        "capacity",
      );
    }

    const at = ++this.version;
    const evicted: string[] = [];
    const before = g.trie.tokenCount;
    if (cur === 0 && g.trie.sequenceIds().length >= this.maxSequencesPerGroup) {
      const oldest = g.trie.sequenceIds()[0] as string;
      g.trie.remove(oldest);
      evicted.push(oldest);
    }
    evicted.push(...g.trie.append(requestId, fresh));
    this.tokens += g.trie.tokenCount - before;
    for (const id of evicted) this.bury(g, id, at);
    let stamps = g.stamps.get(requestId);
    if (!stamps) {
      stamps = [];
      g.stamps.set(requestId, stamps);
    }
    for (let i = 0; i < fresh.length; i++) stamps.push(at);
    this.touch(groupId, g);
    // Over the service's budget: the least recently used other groups go (this one is now the most recent).
    for (const other of [...this.groups.keys()]) {
      if (this.tokens <= this.maxTokens || other === groupId) break;
      this.drop(other);
    }
    return { length: cur + fresh.length, appended: fresh.length, evicted };
  }

  fetch(groupIds: string[], since: number): FetchResult {
    if (!Array.isArray(groupIds)) throw new ArborError("groupIds: must be an array of group ids", "invalid_request");
    if (groupIds.length > this.maxGroups) throw new ArborError(`groupIds: at most ${this.maxGroups} groups per fetch (maxGroups), got ${groupIds.length}`, "invalid_request");
    groupIds.forEach((id, i) => nonEmptyId(id, `groupIds[${i}]`));
    intAtLeast(since, 0, "since");
    if (since > this.version) {
      throw new ArborError(`since: cursor ${since} is ahead of the service's ${this.version} (a cursor from another service, or one that restarted): fetch from 0`, "invalid_request");
    }
    this.expire();
    const groups: GroupDelta[] = [];
    const missing: string[] = [];
    for (const groupId of new Set(groupIds)) {
      const g = this.groups.get(groupId);
      if (!g) {
        missing.push(groupId);
        continue;
      }
      this.touch(groupId, g);
      const delta: GroupDelta = { groupId, createdAt: g.createdAt, sequences: [], evicted: [] };
      for (const requestId of g.trie.sequenceIds()) {
        const stamps = g.stamps.get(requestId) ?? [];
        const start = firstAfter(stamps, since);
        if (start < stamps.length) delta.sequences.push({ requestId, start, tokens: g.trie.tokensOf(requestId).slice(start) });
      }
      for (const [requestId, t] of g.tombstones) if (t.at > since) delta.evicted.push(requestId);
      groups.push(delta);
    }
    return { cursor: this.version, groups, missing };
  }

  draft(request: GroupDraftRequest): Draft {
    const { groupId, context, ...options } = request;
    nonEmptyId(groupId, "groupId");
    checkTokens(context, "context");
    const g = this.live(groupId);
    this.touch(groupId, g);
    const pattern = context.length > this.maxDepth ? context.slice(context.length - this.maxDepth) : context;
    return draftFromTrie(g.trie, pattern, options);
  }

  /** Drop groups whose TTL has passed; returns their ids. */
  expire(): string[] {
    const now = this.clock.now();
    const gone: string[] = [];
    for (const [id, g] of this.groups) if (now >= g.expiresAt) gone.push(id);
    for (const id of gone) this.drop(id);
    return gone;
  }

  private live(groupId: string): Group {
    this.expire();
    const g = this.groups.get(groupId);
    if (!g) throw new ArborError(`groupId: no group '${groupId}' (never registered, expired or evicted): register it first`, "not_found");
    return g;
  }

  /** Tokens held over all groups. */
  get tokenCount(): number {
    return this.tokens;
  }

  private drop(groupId: string): void {
    const g = this.groups.get(groupId);
    if (!g) return;
    this.tokens -= g.trie.tokenCount;
    this.groups.delete(groupId);
  }

  private touch(groupId: string, g: Group): void {
    this.groups.delete(groupId);
    this.groups.set(groupId, g);
  }

  private bury(g: Group, requestId: string, at: number): void {
    const stamps = g.stamps.get(requestId) ?? [];
    g.stamps.delete(requestId);
    g.tombstones.set(requestId, { length: stamps.length, at });
    // Past the bound the oldest tombstone goes: its engine's next update then reads as a gap.
    const maxTombstones = 4 * this.maxSequencesPerGroup;
    for (const id of g.tombstones.keys()) {
      if (g.tombstones.size <= maxTombstones) break;
      g.tombstones.delete(id);
    }
  }

  private gap(groupId: string, requestId: string, prevLen: number, held: number): ArborError {
    return new ArborError(
      `prevLen: ${prevLen} is past the end of request '${requestId}' in group '${groupId}', which holds ${held} tokens: tokens ${held}..${prevLen - 1} were never sent`,
      "gap",
    );
  }
}
