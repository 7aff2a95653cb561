// The machinery of Seer-style policies (divided rollout, with the chunk and placement rules of
// src/gateway/divided/divided-plan.ts, which the gateway's DividedRollout uses too): requests wait
// in one global queue and are generated in chunks (divided rollout: `max_tokens = min(chunk, max_tokens − generated)`), each
// chunk placed on the instance with the most free KV that has a free slot and room now for the
// chunk's whole context (prompt ‖ generated ‖ chunk budget). The growth of chunks already placed is
// not reserved — each grows by at most one chunk before it comes back here, which bounds what the
// engine may have to preempt — so engines stay as full as vLLM keeps them. A continuation stays on
// its previous chunk's instance when that one has room (`kvAffinity`, default on): Seer moves KV
// through a global pool (Mooncake), and without one a move costs a re-prefill of the context.
// The queue's order is the policy's (a PriorityRule); a request ready for longer than
// `starvationMs` goes first whatever its rank, oldest first, and holds the line (nothing ranked
// behind it is placed) until it fits.
import { ArborError } from "../../core/errors.js";
import { checkChunkTokens, chunkKvNeed, mostFreeKv, nextChunkTokens } from "../../gateway/divided/divided-plan.js";
import { RequestBook, type BookEntry } from "./request-book.js";
import type { InstanceView, Placement, RolloutGroupSpec, RolloutScheduler, SchedulerOptions } from "./types.js";

/** How a policy ranks ready requests: keys compared element by element, lower first. */
export interface PriorityRule {
  key(e: BookEntry): readonly number[];
  /** Told when a request finishes (e.g. to update its group's length estimate). */
  onFinished?(e: BookEntry): void;
  /** Told when a group's last request has finished (forget its state). */
  onGroupDone?(groupId: string): void;
  /** Checks an arriving group before it is added (throws to refuse it). */
  validate?(group: RolloutGroupSpec): void;
}

/** A ready request and its policy key, asked once per placement round. */
interface Ranked {
  e: BookEntry;
  key: readonly number[];
}

/** Default starvation bound: generous, so it only catches requests the ranking would never reach. */
export const DEFAULT_STARVATION_MS = 600_000;

/** Create a divided-rollout scheduler ranking requests by `rule`. */
export function createDividedScheduler(name: string, rule: PriorityRule, opts: SchedulerOptions = {}): RolloutScheduler {
  const chunkTokens = opts.chunkTokens ?? Infinity;
  const starvationMs = opts.starvationMs ?? DEFAULT_STARVATION_MS;
  const affinity = opts.kvAffinity ?? true;
  checkChunkTokens(name, "chunkTokens", chunkTokens, "config");
  if (!(starvationMs >= 0)) throw new ArborError(`${name}: starvationMs must be >= 0, got ${starvationMs}`, "config");
  const book = new RequestBook(name);
  const ready = new Map<string, BookEntry>();

  /** The policy's order: keys element by element, then arrival (group, then index in it). */
  const compare = (a: Ranked, b: Ranked): number => {
    const ka = a.key;
    const kb = b.key;
    for (let i = 0; i < Math.max(ka.length, kb.length); i++) {
      const d = (ka[i] ?? 0) - (kb[i] ?? 0);
      if (d !== 0) return d;
    }
    return a.e.groupSeq - b.e.groupSeq || a.e.req.index - b.e.req.index;
  };

  /** KV tokens a request's next chunk needs (its whole context at the chunk's end). */
  const needOf = (e: BookEntry): number => chunkKvNeed(e.req.promptTokens, e.generated, nextChunkTokens(chunkTokens, e.req.maxTokens, e.generated));

  return {
    name,
    addGroup(group: RolloutGroupSpec, now: number) {
      rule.validate?.(group);
      for (const e of book.addGroup(group, now)) ready.set(e.req.id, e);
    },
    onChunkEnd(requestId, tokens, finished, now) {
      const e = book.chunkEnd(requestId, tokens, finished, now);
      if (e.status === "ready") {
        ready.set(e.req.id, e);
        return;
      }
      rule.onFinished?.(e);
      // The book forgets a group once all of it finished: so does the rule (bounded memory).
      if (book.group(e.req.groupId).length === 0) rule.onGroupDone?.(e.req.groupId);
    },
    next(instances: readonly InstanceView[], now: number): Placement[] {
      if (ready.size === 0) return [];
      const room = instances.map((i) => ({ name: i.name, freeKvTokens: i.kvCapacityTokens - i.usedKvTokens, slots: i.maxActive - i.active }));
      if (!room.some((r) => r.slots > 0)) return [];
      const maxCapacity = Math.max(...instances.map((i) => i.kvCapacityTokens));
      let maxFree = -Infinity;
      for (const r of room) if (r.slots > 0 && r.freeKvTokens > maxFree) maxFree = r.freeKvTokens;
      const starving: BookEntry[] = [];
      // Only a request whose next chunk fits the most free KV of an instance with a free slot can be placed
      // this round (placing only takes KV away): the others are neither ranked nor sorted, since place() would
      // pass over each. This is called at every chunk's end with thousands ready at full scale, and while KV is
      // full few fit. Each entry's key is asked once, not at every comparison.
      let rest: Ranked[] = [];
      let tooLarge = false;
      for (const e of ready.values()) {
        if (now - e.readySince >= starvationMs) starving.push(e);
        else {
          const need = needOf(e);
          if (need > maxCapacity) tooLarge = true;
          else if (need <= maxFree) rest.push({ e, key: rule.key(e) });
        }
      }
      // One that fits no instance at all is an error, raised where the ranking reaches it: rank them all then.
      if (tooLarge) {
        rest = [];
        for (const e of ready.values()) if (now - e.readySince < starvationMs) rest.push({ e, key: rule.key(e) });
      }
      starving.sort((a, b) => a.readySince - b.readySince || a.groupSeq - b.groupSeq || a.req.index - b.req.index);
      rest.sort(compare);
      const out: Placement[] = [];
      const place = (e: BookEntry): boolean => {
        const chunk = nextChunkTokens(chunkTokens, e.req.maxTokens, e.generated);
        const need = chunkKvNeed(e.req.promptTokens, e.generated, chunk);
        if (need > maxCapacity) {
          throw new ArborError(`${name}: request ${e.req.id} needs ${need} KV tokens for its next chunk, more than any instance holds (${maxCapacity})`, "capacity");
        }
        let best = mostFreeKv(room, (r) => r.slots > 0 && r.freeKvTokens >= need);
        if (best === undefined) return false;
        // Without a global KV pool, moving a continuation re-prefills its context: stay where its KV
        // is cached whenever that instance has room (a placement on most free KV otherwise).
        const home = affinity && e.lastInstance !== undefined ? room.find((r) => r.name === e.lastInstance) : undefined;
        if (home !== undefined && home.slots > 0 && home.freeKvTokens >= need) best = home;
        e.lastInstance = best.name;
        best.freeKvTokens -= need;
        best.slots--;
        book.place(e);
        ready.delete(e.req.id);
        out.push({ requestId: e.req.id, instance: best.name, maxTokens: chunk, generated: e.generated, priority: out.length });
        return true;
      };
      for (const e of starving) {
        // Hold the line: nothing ranked lower may take the room a starving request is waiting for.
        if (!place(e)) return out;
      }
      for (const { e } of rest) {
        if (!room.some((r) => r.slots > 0)) break;
        place(e);
      }
      return out;
    },
    unfinished: () => book.unfinished(),
  };
}
