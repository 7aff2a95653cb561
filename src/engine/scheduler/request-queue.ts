// The scheduler's waiting queue, ordered by policy as vLLM v1's request_queue.py: "fcfs" keeps
// arrival order (preempted requests go back to the front), "priority" keeps (priority, arrival) order.

/** What the queue needs to know about an entry. */
export interface Queued {
  /** Lower = sooner (vLLM's convention). */
  priority: number;
  arrivalTime: number;
  /** Admission sequence number: a deterministic tie-break for equal (priority, arrival). */
  seq: number;
}

export type SchedulingPolicy = "fcfs" | "priority";

/** Ordered waiting queue; small and array-backed, the scheduler bounds its length. */
export class RequestQueue<T extends Queued> {
  private items: T[] = [];

  constructor(readonly policy: SchedulingPolicy) {}

  get length(): number {
    return this.items.length;
  }

  /** Entry at position `i` in scheduling order. */
  at(i: number): T | undefined {
    return this.items[i];
  }

  /** A new arrival: the back (fcfs) or its place by (priority, arrival). */
  add(item: T): void {
    if (this.policy === "fcfs") this.items.push(item);
    else this.insertSorted(item);
  }

  /** A preempted request returning: the front (fcfs) or its place by (priority, arrival). */
  prepend(item: T): void {
    if (this.policy === "fcfs") this.items.unshift(item);
    else this.insertSorted(item);
  }

  removeAt(i: number): T {
    const [item] = this.items.splice(i, 1);
    if (item === undefined) throw new RangeError(`removeAt(${i}) out of range (length ${this.items.length})`);
    return item;
  }

  /** Remove `item` if present; returns whether it was. */
  remove(item: T): boolean {
    const i = this.items.indexOf(item);
    if (i < 0) return false;
    this.items.splice(i, 1);
    return true;
  }

  [Symbol.iterator](): Iterator<T> {
    return this.items[Symbol.iterator]();
  }

  private insertSorted(item: T): void {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareQueued(this.items[mid] as T, item) <= 0) lo = mid + 1;
      else hi = mid;
    }
    this.items.splice(lo, 0, item);
  }
}

/** vLLM's Request ordering: priority, then arrival time, then (here) admission order. */
export function compareQueued(a: Queued, b: Queued): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.arrivalTime !== b.arrivalTime) return a.arrivalTime - b.arrivalTime;
  return a.seq - b.seq;
}
