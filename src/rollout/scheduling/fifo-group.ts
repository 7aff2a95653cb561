// `fifo-group`: the baseline most RL frameworks ship. Groups are taken first-come first-served and
// each group's n requests are bound to one instance (the one with the fewest unfinished bound
// requests when the group is placed) and sent there at once with their whole budget; the engine's
// own queue and preemption then decide what runs. A request interrupted before it finished (a
// weight sync) goes back to the same instance.
import { ArborError } from "../../core/errors.js";
import { RequestBook, type BookEntry } from "./request-book.js";
import type { InstanceView, Placement, RolloutGroupSpec, RolloutScheduler } from "./types.js";

/** Create the fifo-group policy. */
export function createFifoGroupScheduler(): RolloutScheduler {
  const book = new RequestBook("fifo-group");
  /** Ready requests, in arrival order (Map iteration order = insertion order). */
  const ready = new Map<string, BookEntry>();
  const bound = new Map<string, string>();
  /** Unfinished requests bound to each instance. */
  const load = new Map<string, number>();

  return {
    name: "fifo-group",
    addGroup(group: RolloutGroupSpec, now: number) {
      for (const e of book.addGroup(group, now)) ready.set(e.req.id, e);
    },
    onChunkEnd(requestId, tokens, finished, now) {
      const e = book.chunkEnd(requestId, tokens, finished, now);
      if (e.status === "ready") {
        // Re-queued behind nothing: an interrupted request keeps its place ahead of later groups.
        ready.set(e.req.id, e);
        return;
      }
      const inst = bound.get(e.req.groupId) as string;
      load.set(inst, (load.get(inst) ?? 0) - 1);
      // The book forgets a group once all of it finished: so does the binding (bounded memory).
      if (book.group(e.req.groupId).length === 0) bound.delete(e.req.groupId);
    },
    next(instances: readonly InstanceView[]): Placement[] {
      if (ready.size === 0) return [];
      if (instances.length === 0) throw new ArborError("fifo-group: next() needs at least one instance", "invalid_request");
      const names = new Set(instances.map((i) => i.name));
      const order = [...ready.values()].sort((a, b) => a.groupSeq - b.groupSeq || a.req.index - b.req.index);
      const out: Placement[] = [];
      for (const e of order) {
        let inst = bound.get(e.req.groupId);
        if (inst === undefined || !names.has(inst)) {
          inst = leastLoaded(instances, load);
          if (inst !== bound.get(e.req.groupId)) {
            const prev = bound.get(e.req.groupId);
            // Moving a group (its instance left): carry its unfinished requests' load over.
            const unfinished = book.group(e.req.groupId).filter((x) => x.status !== "finished").length;
            if (prev !== undefined) load.set(prev, (load.get(prev) ?? 0) - unfinished);
            load.set(inst, (load.get(inst) ?? 0) + unfinished);
            bound.set(e.req.groupId, inst);
          }
        }
        book.place(e);
        ready.delete(e.req.id);
        out.push({ requestId: e.req.id, instance: inst, maxTokens: e.req.maxTokens - e.generated, generated: e.generated, priority: e.groupSeq });
      }
      return out;
    },
    unfinished: () => book.unfinished(),
  };
}

function leastLoaded(instances: readonly InstanceView[], load: ReadonlyMap<string, number>): string {
  let best = instances[0] as InstanceView;
  for (const i of instances) if ((load.get(i.name) ?? 0) < (load.get(best.name) ?? 0)) best = i;
  return best.name;
}
