// Bookkeeping every rollout scheduling policy shares: each request's state (ready, placed, finished),
// tokens generated so far and when it became ready, with the contract's checks (new ids, one chunk
// in flight per request, no event for an unknown or finished request) raised as clear errors.
import { ArborError } from "../../core/errors.js";
import type { RolloutGroupSpec, RolloutRequest } from "./types.js";

export type RequestStatus = "ready" | "placed" | "finished";

/** A request's scheduling state. */
export interface BookEntry {
  req: RolloutRequest;
  /** Arrival order of the request's group (0, 1, ...). */
  groupSeq: number;
  status: RequestStatus;
  generated: number;
  /** Clock time the request last became ready (arrival or end of its previous chunk). */
  readySince: number;
  /** Instance of the request's last chunk (where its KV may still be cached). */
  lastInstance?: string;
}

/** The requests of one policy instance, by id. */
export class RequestBook {
  private readonly entries = new Map<string, BookEntry>();
  private readonly groups = new Map<string, BookEntry[]>();
  private groupCount = 0;
  private open = 0;

  constructor(private readonly policy: string) {}

  /** Register a group's requests as ready; returns their entries in sample order. */
  addGroup(group: RolloutGroupSpec, now: number): BookEntry[] {
    if (this.groups.has(group.id)) throw new ArborError(`${this.policy}: group ${group.id} was already added`, "invalid_request");
    if (group.requests.length === 0) throw new ArborError(`${this.policy}: group ${group.id} has no requests`, "invalid_request");
    const seen = new Set<string>();
    for (const r of group.requests) {
      if (this.entries.has(r.id) || seen.has(r.id)) throw new ArborError(`${this.policy}: request id ${r.id} is used twice`, "invalid_request");
      if (r.groupId !== group.id) throw new ArborError(`${this.policy}: request ${r.id} names group ${r.groupId}, not ${group.id}`, "invalid_request");
      if (!Number.isInteger(r.maxTokens) || r.maxTokens < 1) {
        throw new ArborError(`${this.policy}: request ${r.id}: maxTokens must be an integer >= 1, got ${r.maxTokens}`, "invalid_request");
      }
      if (!Number.isInteger(r.promptTokens) || r.promptTokens < 1) {
        throw new ArborError(`${this.policy}: request ${r.id}: promptTokens must be an integer >= 1, got ${r.promptTokens}`, "invalid_request");
      }
      seen.add(r.id);
    }
    const seq = this.groupCount++;
    const list = group.requests.map((req) => ({ req, groupSeq: seq, status: "ready" as RequestStatus, generated: 0, readySince: now }));
    for (const e of list) this.entries.set(e.req.id, e);
    this.groups.set(group.id, list);
    this.open += list.length;
    return list;
  }

  /** Mark a request placed (it must be ready). */
  place(e: BookEntry): void {
    if (e.status !== "ready") throw new ArborError(`${this.policy}: request ${e.req.id} placed while ${e.status}`, "internal");
    e.status = "placed";
  }

  /**
   * Record the end of a placed chunk. Throws for an unknown request, one with no chunk placed, or
   * more tokens than its budget.
   */
  chunkEnd(requestId: string, tokens: number, finished: boolean, now: number): BookEntry {
    const e = this.entries.get(requestId);
    if (e === undefined) throw new ArborError(`${this.policy}: chunk end for unknown request ${requestId}`, "invalid_request");
    if (e.status !== "placed") throw new ArborError(`${this.policy}: chunk end for request ${requestId}, which is ${e.status}`, "invalid_request");
    if (!Number.isInteger(tokens) || tokens < 0) throw new ArborError(`${this.policy}: request ${requestId}: tokens must be an integer >= 0, got ${tokens}`, "invalid_request");
    if (e.generated + tokens > e.req.maxTokens) {
      throw new ArborError(`${this.policy}: request ${requestId} generated ${e.generated + tokens} tokens, over its maxTokens ${e.req.maxTokens}`, "invalid_request");
    }
    e.generated += tokens;
    // A request whose budget is spent is complete whatever the caller says: nothing is left to place.
    if (finished || e.generated === e.req.maxTokens) {
      e.status = "finished";
      this.open--;
      const group = this.groups.get(e.req.groupId) as BookEntry[];
      if (group.every((x) => x.status === "finished")) {
        // Bounded memory over a long run: a finished group is forgotten (later events for its ids
        // are reported as for unknown requests).
        for (const x of group) this.entries.delete(x.req.id);
        this.groups.delete(e.req.groupId);
      }
    } else {
      e.status = "ready";
      e.readySince = now;
    }
    return e;
  }

  /** Entries of a group, in sample order; empty once the whole group has finished (it is forgotten). */
  group(groupId: string): readonly BookEntry[] {
    return this.groups.get(groupId) ?? [];
  }

  /** Requests not finished. */
  unfinished(): number {
    return this.open;
  }
}
