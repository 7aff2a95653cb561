// The draft service's interface (Seer's DGDS): engines feed every group member's new tokens into one
// suffix tree per group, fetch what others added since their last fetch, and draft from the group's tree.
// Implemented in process (group-draft-service.ts) and over HTTP (draft-service-client.ts against
// draft-service-routes.ts), so several engines can share a group's tree.
import type { Draft, DraftOptions } from "./suffix-draft.js";

export type Awaitable<T> = T | Promise<T>;

export interface RegisterGroupResult {
  groupId: string;
  /** When the group expires unless updated again (the service's clock, ms). */
  expiresAt: number;
  /** A group evicted (least recently used) to make room, if any. */
  evictedGroup?: string;
}

export interface UpdateResult {
  /** The request's sequence length after the update. */
  length: number;
  /** Tokens that were new (0 for a repeated update, or for a sequence evicted earlier). */
  appended: number;
  /** Sequences of the group evicted to make room for these tokens. */
  evicted: string[];
}

/** New tokens of one sequence: they go at `start` (the length the caller already holds). */
export interface SequenceDelta {
  requestId: string;
  start: number;
  tokens: number[];
}

export interface GroupDelta {
  groupId: string;
  /**
   * The cursor at which the group was registered: a caller whose cursor is older holds nothing of this
   * group (an earlier group of the same id expired), so it should drop what it has before applying.
   */
  createdAt: number;
  sequences: SequenceDelta[];
  /** Sequences evicted since the cursor: drop them. */
  evicted: string[];
}

export interface FetchResult {
  /** Pass it as `since` to the next fetch of the same groups. */
  cursor: number;
  groups: GroupDelta[];
  /** Groups asked for that are unknown or expired. */
  missing: string[];
}

/** A draft request against one group's tree. */
export interface GroupDraftRequest extends DraftOptions {
  groupId: string;
  /** The request's recent tokens (its prompt and output so far; only the last maxDepth are used). */
  context: readonly number[];
}

/** Seer's grouped draft service. */
export interface DraftService {
  /** Create a group (or refresh its TTL); it expires `ttlMs` after its last registration or update. */
  registerGroup(groupId: string, ttlMs: number): Awaitable<RegisterGroupResult>;
  /**
   * Record `newTokens` at position `prevLen` of `requestId`'s sequence in the group. Repeating an
   * update (same prevLen and tokens) changes nothing; a prevLen past the sequence's end is an error.
   */
  update(groupId: string, requestId: string, prevLen: number, newTokens: readonly number[]): Awaitable<UpdateResult>;
  /** What was added to these groups after cursor `since` (0: everything). */
  fetch(groupIds: string[], since: number): Awaitable<FetchResult>;
  /** A SuffixDecoding draft from the group's tree (all of its sequences: the siblings' and the request's own). */
  draft(request: GroupDraftRequest): Awaitable<Draft>;
}
