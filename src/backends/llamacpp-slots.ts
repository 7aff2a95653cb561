// Which llama-server slot holds which program: a program keeps its slot (so cache_prompt re-uses
// its KV) until the slots run out, then the least recently used program loses its slot.

export class LlamaSlotTable {
  private readonly byProgram = new Map<string, { slot: number; used: number }>();
  private tick = 0;

  constructor(readonly slots: number) {
    if (!(Number.isInteger(slots) && slots >= 1)) throw new RangeError(`llama-server slots: must be an integer >= 1, got ${slots}`);
  }

  /** The program's slot, assigning a free one (or the least recently used program's) when it has none. */
  slotFor(programId: string): number {
    const cur = this.byProgram.get(programId);
    if (cur) {
      cur.used = ++this.tick;
      return cur.slot;
    }
    const taken = new Set([...this.byProgram.values()].map((e) => e.slot));
    let slot = -1;
    for (let s = 0; s < this.slots; s++) {
      if (!taken.has(s)) {
        slot = s;
        break;
      }
    }
    if (slot < 0) {
      let lru: [string, { slot: number; used: number }] | undefined;
      for (const e of this.byProgram) if (!lru || e[1].used < lru[1].used) lru = e;
      // slots >= 1 and all taken, so there is an owner to evict.
      const [victim, entry] = lru as [string, { slot: number; used: number }];
      this.byProgram.delete(victim);
      slot = entry.slot;
    }
    this.byProgram.set(programId, { slot, used: ++this.tick });
    return slot;
  }

  /** The program's slot, if it holds one. */
  get(programId: string): number | undefined {
    return this.byProgram.get(programId)?.slot;
  }

  /** The program no longer owns its slot (paused or finished). */
  release(programId: string): void {
    this.byProgram.delete(programId);
  }
}
