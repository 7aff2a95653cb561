// An engine's local copy of the groups' suffix tries, kept up to date with the draft service's `fetch`
// (Seer's engines pull the group tree's new content rather than asking the service for every draft), so
// a draft per request per step costs no round trip. One cursor per group: groups fetched with the same
// cursor share one fetch.
import type { DraftService, GroupDelta } from "./draft-service.js";
import { draftFromTrie, emptyDraft, type Draft, type DraftOptions } from "./suffix-draft.js";
import { DEFAULT_MAX_DEPTH, SuffixTrie } from "./suffix-trie.js";

interface Copy {
  cursor: number;
  trie: SuffixTrie;
}

/** Local copies of groups' tries. */
export class GroupReplica {
  private readonly copies = new Map<string, Copy>();

  constructor(
    private readonly service: Pick<DraftService, "fetch">,
    /** The service's bounds (so the copy never evicts what the service keeps). */
    private readonly bounds: { maxDepth?: number; maxTokensPerGroup?: number } = {},
  ) {}

  /** Groups copied here. */
  groupIds(): string[] {
    return [...this.copies.keys()];
  }

  /** A copied group's sequences and their tokens. */
  sequences(groupId: string): Map<string, readonly number[]> {
    const trie = this.copies.get(groupId)?.trie;
    return new Map((trie?.sequenceIds() ?? []).map((id) => [id, trie?.tokensOf(id) ?? []]));
  }

  /** Whether the group is copied here. */
  has(groupId: string): boolean {
    return this.copies.has(groupId);
  }

  /** Stop copying a group (no request here needs it): the next sync of it fetches it whole again. */
  drop(groupId: string): void {
    this.copies.delete(groupId);
  }

  /** Bring these groups up to date (starting to copy the new ones; dropping those the service no longer has). */
  async sync(groupIds: readonly string[]): Promise<void> {
    const byCursor = new Map<number, string[]>();
    for (const id of new Set(groupIds)) {
      const cursor = this.copies.get(id)?.cursor ?? 0;
      byCursor.set(cursor, [...(byCursor.get(cursor) ?? []), id]);
    }
    for (const [since, ids] of byCursor) {
      const result = await this.service.fetch(ids, since);
      for (const id of result.missing) this.copies.delete(id);
      for (const delta of result.groups) this.apply(delta, since, result.cursor);
    }
  }

  /** Draft from a copied group (an empty draft for a group not copied). */
  draft(groupId: string, context: readonly number[], options: DraftOptions = {}): Draft {
    const trie = this.copies.get(groupId)?.trie;
    if (!trie) return emptyDraft();
    const pattern = context.length > trie.maxDepth ? context.slice(context.length - trie.maxDepth) : context;
    return draftFromTrie(trie, pattern, options);
  }

  private apply(delta: GroupDelta, since: number, cursor: number): void {
    let copy = this.copies.get(delta.groupId);
    // A group registered after our cursor is a new group of the same id: what we hold is stale.
    if (!copy || delta.createdAt > since) {
      copy = { cursor, trie: new SuffixTrie({ maxDepth: this.bounds.maxDepth ?? DEFAULT_MAX_DEPTH, maxTokens: this.bounds.maxTokensPerGroup ?? 1 << 20 }) };
      this.copies.set(delta.groupId, copy);
    }
    for (const id of delta.evicted) copy.trie.remove(id);
    for (const s of delta.sequences) {
      const held = copy.trie.length(s.requestId);
      // A sequence restarted from 0 after its eviction record was dropped: start it again.
      if (s.start < held && s.start === 0) copy.trie.remove(s.requestId);
      const from = copy.trie.length(s.requestId);
      if (s.start > from) {
        // Something was missed (should not happen with per-group cursors): start the group over.
        this.copies.delete(delta.groupId);
        return;
      }
      copy.trie.append(s.requestId, s.tokens.slice(from - s.start));
    }
    copy.cursor = cursor;
  }
}
