// Forge's windowed FIFO for asynchronous RL (TECHNIQUES §B3). Items (here: groups) enter in
// generation order Q = [T_0 … T_{N−1}]; the trainer may take any *completed* item whose position is
// in [head, head + W), never one beyond the window, and the head moves only past consumed items,
// so a straggler inside the window is waited for while its faster neighbours are taken. W = 1 is
// strict oldest-first; W = N is "whatever finished". Bounded: at most `capacity` unconsumed items.
import { ArborError, CapacityError } from "../../core/errors.js";

/** An item taken by the trainer, with its position in generation order. */
export interface Taken<T> {
  id: string;
  position: number;
  value: T;
}

interface Slot<T> {
  id: string;
  done: boolean;
  value?: T;
}

/** The windowed FIFO queue; see the file header. */
export class WindowedFifo<T> {
  private readonly slots = new Map<number, Slot<T>>();
  private readonly positions = new Map<string, number>();
  private head = 0;
  private tail = 0;

  constructor(
    readonly window: number,
    readonly capacity: number,
  ) {
    if (!Number.isInteger(window) || window < 1) throw new ArborError(`windowed FIFO: window must be an integer >= 1, got ${window}`, "config");
    if (!Number.isInteger(capacity) || capacity < 1) throw new ArborError(`windowed FIFO: capacity must be an integer >= 1, got ${capacity}`, "config");
  }

  /** Append an item that has started generating. Throws CapacityError when `capacity` are unconsumed. */
  push(id: string): number {
    if (this.positions.has(id)) throw new ArborError(`windowed FIFO: ${id} was already pushed`, "invalid_request");
    if (this.slots.size >= this.capacity) throw new CapacityError("windowed FIFO (unconsumed items)", this.capacity);
    const pos = this.tail++;
    this.slots.set(pos, { id, done: false });
    this.positions.set(id, pos);
    return pos;
  }

  /** Mark an item complete, with what the trainer will get. */
  complete(id: string, value: T): void {
    const pos = this.positions.get(id);
    const slot = pos === undefined ? undefined : this.slots.get(pos);
    if (slot === undefined) throw new ArborError(`windowed FIFO: complete(${id}): unknown or already consumed`, "invalid_request");
    if (slot.done) throw new ArborError(`windowed FIFO: ${id} completed twice`, "invalid_request");
    slot.done = true;
    slot.value = value;
  }

  /**
   * Take up to `max` completed items inside the window, oldest first. Consuming the head slides the
   * window at once, so items it brings in are taken by the same call.
   */
  take(max: number): Taken<T>[] {
    const out: Taken<T>[] = [];
    let p = this.head;
    while (out.length < max && p < Math.min(this.head + this.window, this.tail)) {
      const s = this.slots.get(p);
      if (s !== undefined && s.done) {
        this.slots.delete(p);
        this.positions.delete(s.id);
        out.push({ id: s.id, position: p, value: s.value as T });
        while (this.head < this.tail && !this.slots.has(this.head)) this.head++;
      }
      p = Math.max(p + 1, this.head);
    }
    return out;
  }

  /** Position of the oldest unconsumed item (= tail when empty). */
  get headPosition(): number {
    return this.head;
  }

  /** Unconsumed items (generating or completed). */
  get size(): number {
    return this.slots.size;
  }

  /** Completed items the trainer could take now. */
  get takeable(): number {
    let n = 0;
    const end = Math.min(this.head + this.window, this.tail);
    for (let p = this.head; p < end; p++) if (this.slots.get(p)?.done) n++;
    return n;
  }
}
