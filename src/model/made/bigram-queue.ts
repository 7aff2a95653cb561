// The priority queue of candidate merges both llama.cpp tokenizers use (llama_priority_queue of
// llm_bigram_spm / llm_bigram_bpe): a binary heap whose order is given by `before`.

/** A binary heap; `before(a, b)` is true when `a` must pop before `b`. */
export class BigramQueue<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    const h = this.items;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(h[i] as T, h[p] as T)) break;
      [h[i], h[p]] = [h[p] as T, h[i] as T];
      i = p;
    }
  }

  /** Remove and return the first item; the queue must not be empty. */
  pop(): T {
    const h = this.items;
    const top = h[0] as T;
    const last = h.pop() as T;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.before(h[l] as T, h[m] as T)) m = l;
        if (r < h.length && this.before(h[r] as T, h[m] as T)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m] as T, h[i] as T];
        i = m;
      }
    }
    return top;
  }
}

/**
 * A word's symbols as the doubly linked list both llama.cpp sessions keep (`prev`/`next` indexes,
 * -1 at the ends), so a merge unlinks its right side without moving the others.
 */
export class SymbolLinks {
  readonly prev: number[];
  readonly next: number[];

  constructor(n: number) {
    this.prev = Array.from({ length: n }, (_, i) => i - 1);
    this.next = Array.from({ length: n }, (_, i) => (i + 1 < n ? i + 1 : -1));
  }

  /** Unlinks `right` once it is merged into `left`; returns the symbol now after `left` (-1: none). */
  join(left: number, right: number): number {
    const after = this.next[right] as number;
    this.next[left] = after;
    if (after >= 0) this.prev[after] = left;
    return after;
  }
}
