// An engine's side of a draft service shared by several engines (Seer's DGDS over HTTP): once per step it
// sends its requests' new output tokens to the service (`update`) and brings its local copies of their
// groups up to date (GroupReplica, one `fetch` per cursor), so a sibling that ran on another engine drafts
// this engine's requests without a round trip per draft. The service is an optimisation, never a
// dependency: when it cannot be reached the step reports failure and the engine drafts from its own
// in-process group trees for that step; after a failure the service is skipped for a number of steps that
// doubles with each failure in a row (bounded), so an unreachable service costs few timeouts.
import { ArborError } from "../../core/errors.js";
import type { DraftService } from "./draft-service.js";
import { GroupReplica } from "./group-replica.js";
import type { Draft, DraftOptions } from "./suffix-draft.js";

export interface SharedGroupDraftsOptions {
  /** How long the service keeps a group after its last update (ms). */
  ttlMs: number;
  /** Steps skipped after the first failure in a row; doubled with each further one (default 1). */
  minBackoffSteps?: number;
  /** The most steps skipped after failures in a row (default 64). */
  maxBackoffSteps?: number;
  /** The service's bounds, so the local copies never evict what the service keeps. */
  bounds?: { maxDepth?: number; maxTokensPerGroup?: number };
}

/** One request's output, as far as the step got. */
export interface GroupOutput {
  requestId: string;
  groupId: string;
  /** The request's output tokens so far (its whole output, not only the step's). */
  output: readonly number[];
}

/** Counters of the shared service's use. */
export interface SharedGroupDraftsStats {
  /** Steps that synced with the service (drafts came from the shared trees). */
  syncedSteps: number;
  /** Steps that drafted from the engine's own trees: the service failed or was being skipped. */
  localSteps: number;
  /** Calls to the service that failed (unreachable, timed out, or refused). */
  failures: number;
}

/** An engine's use of a shared draft service; see the file header. */
export class SharedGroupDrafts {
  private readonly replica: GroupReplica;
  /** Request → its group and how many of its output tokens the service holds. */
  private readonly sent = new Map<string, { groupId: string; len: number; refused: boolean }>();
  private readonly minBackoff: number;
  private readonly maxBackoff: number;
  private failuresInARow = 0;
  private skipSteps = 0;
  private readonly counters: SharedGroupDraftsStats = { syncedSteps: 0, localSteps: 0, failures: 0 };

  constructor(
    private readonly service: DraftService,
    private readonly opts: SharedGroupDraftsOptions,
  ) {
    this.replica = new GroupReplica(service, opts.bounds ?? {});
    this.minBackoff = opts.minBackoffSteps ?? 1;
    this.maxBackoff = opts.maxBackoffSteps ?? 64;
    if (!(Number.isInteger(this.minBackoff) && this.minBackoff >= 0)) throw new ArborError(`minBackoffSteps: must be an integer >= 0, got ${this.minBackoff}`, "config");
    if (!(Number.isInteger(this.maxBackoff) && this.maxBackoff >= this.minBackoff)) throw new ArborError(`maxBackoffSteps: must be an integer >= minBackoffSteps (${this.minBackoff}), got ${this.maxBackoff}`, "config");
  }

  stats(): SharedGroupDraftsStats {
    return { ...this.counters };
  }

  /** Groups copied locally now (bounded by the groups of the requests still registered). */
  copiedGroups(): string[] {
    return this.replica.groupIds();
  }

  /**
   * Send these requests' new tokens and sync the groups of `draftGroups` (those about to draft). True when
   * the local copies are current, so drafts should come from {@link draft}; false when the step must draft
   * from the engine's own trees (the service failed now or is being skipped after failures).
   */
  async step(outputs: readonly GroupOutput[], draftGroups: readonly string[]): Promise<boolean> {
    // A step with no grouped request has nothing to send or sync (and is no step of the service's).
    if (outputs.length === 0 && draftGroups.length === 0) return true;
    if (this.skipSteps > 0) {
      this.skipSteps--;
      this.counters.localSteps++;
      return false;
    }
    try {
      await Promise.all(outputs.map((o) => this.send(o)));
      if (draftGroups.length > 0) await this.syncCopies([...new Set(draftGroups)]);
    } catch (err) {
      this.counters.failures++;
      this.counters.localSteps++;
      this.failuresInARow++;
      this.skipSteps = Math.min(this.maxBackoff, this.minBackoff * 2 ** (this.failuresInARow - 1));
      if (!(err instanceof ArborError)) throw err;
      return false;
    }
    this.failuresInARow = 0;
    this.counters.syncedSteps++;
    return true;
  }

  /**
   * A draft from the local copy of the group (the siblings' tokens from every engine, and the request's own);
   * undefined when the group is not copied (the service no longer has it): draft from the engine's own trees.
   */
  draft(groupId: string, context: readonly number[], options: DraftOptions): Draft | undefined {
    return this.replica.has(groupId) ? this.replica.draft(groupId, context, options) : undefined;
  }

  /** Forget a request; its group's copy goes when no request of `liveGroups` (those still registered) needs it. */
  forget(requestId: string, liveGroups: ReadonlySet<string>): void {
    const s = this.sent.get(requestId);
    this.sent.delete(requestId);
    if (s && !liveGroups.has(s.groupId)) this.replica.drop(s.groupId);
  }

  private async send(o: GroupOutput): Promise<void> {
    let s = this.sent.get(o.requestId);
    if (!s) {
      s = { groupId: o.groupId, len: 0, refused: false };
      this.sent.set(o.requestId, s);
    }
    if (s.refused || o.output.length <= s.len) return;
    try {
      try {
        await this.service.update(o.groupId, o.requestId, s.len, o.output.slice(s.len));
      } catch (err) {
        if (!(err instanceof ArborError && (err.code === "not_found" || err.code === "gap"))) throw err;
        // The group is new to the service, expired or was evicted (and recreated): register it and send
        // the whole output (a repeat of tokens the service holds is a no-op).
        await this.service.registerGroup(o.groupId, this.opts.ttlMs);
        await this.service.update(o.groupId, o.requestId, 0, o.output);
      }
    } catch (err) {
      if (!(err instanceof ArborError && (err.code === "capacity" || err.code === "conflict"))) throw err;
      // The service will never take this request's tokens (over a group's budget, or it holds others
      // under this id): stop sending them; its siblings still draft from the group.
      s.refused = true;
      this.counters.failures++;
      return;
    }
    s.len = o.output.length;
  }

  private async syncCopies(groupIds: string[]): Promise<void> {
    try {
      await this.replica.sync(groupIds);
    } catch (err) {
      // A copy may be half-applied or its cursor from a service that restarted: start those groups over.
      for (const id of groupIds) this.replica.drop(id);
      throw err;
    }
  }
}
