// The free-block queue of the KV block pool (vLLM v1's FreeKVCacheBlockQueue): a doubly linked list
// over block ids in eviction order, head = next to reuse, with O(1) removal from the middle so that a
// prefix-cache hit can take a cached free block back.

const NONE = -1;

/** Doubly linked list of block ids 0..n-1; each id is in the queue at most once. */
export class FreeBlockQueue {
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly inQueue: Uint8Array;
  private head = NONE;
  private tail = NONE;
  private count = 0;

  /** Starts with every block free, in id order. */
  constructor(numBlocks: number) {
    this.prev = new Int32Array(numBlocks).fill(NONE);
    this.next = new Int32Array(numBlocks).fill(NONE);
    this.inQueue = new Uint8Array(numBlocks);
    for (let i = 0; i < numBlocks; i++) this.pushBack(i);
  }

  get length(): number {
    return this.count;
  }

  has(id: number): boolean {
    return this.inQueue[id] === 1;
  }

  /** The head (least recently freed) without removing it, or undefined. */
  peek(): number | undefined {
    return this.head === NONE ? undefined : this.head;
  }

  /** Removes and returns the head, or undefined when empty. */
  popFront(): number | undefined {
    if (this.head === NONE) return undefined;
    const id = this.head;
    this.remove(id);
    return id;
  }

  /** The block after `id` (which must be in the queue) towards the tail, or undefined at the tail. */
  after(id: number): number | undefined {
    if (this.inQueue[id] !== 1) throw new Error(`free queue: block ${id} is not in the queue`);
    const n = this.next[id] ?? NONE;
    return n === NONE ? undefined : n;
  }

  /** Removes and returns the first block from the head not in `skip`, or undefined. */
  popFrontSkipping(skip: ReadonlySet<number>): number | undefined {
    let id = this.head;
    while (id !== NONE && skip.has(id)) id = this.next[id] ?? NONE;
    if (id === NONE) return undefined;
    this.remove(id);
    return id;
  }

  /** Appends as most recently freed (evicted last). */
  pushBack(id: number): void {
    this.assertOut(id);
    this.prev[id] = this.tail;
    this.next[id] = NONE;
    if (this.tail === NONE) this.head = id;
    else this.next[this.tail] = id;
    this.tail = id;
    this.inQueue[id] = 1;
    this.count++;
  }

  /** Inserts at the head (evicted first). */
  pushFront(id: number): void {
    this.assertOut(id);
    this.next[id] = this.head;
    this.prev[id] = NONE;
    if (this.head === NONE) this.tail = id;
    else this.prev[this.head] = id;
    this.head = id;
    this.inQueue[id] = 1;
    this.count++;
  }

  /** Unlinks `id` (which must be in the queue). */
  remove(id: number): void {
    if (this.inQueue[id] !== 1) throw new Error(`free queue: block ${id} is not in the queue`);
    const p = this.prev[id] ?? NONE;
    const n = this.next[id] ?? NONE;
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
    this.prev[id] = NONE;
    this.next[id] = NONE;
    this.inQueue[id] = 0;
    this.count--;
  }

  /** Block ids from head to tail. */
  toArray(): number[] {
    const out: number[] = [];
    for (let id = this.head; id !== NONE; id = this.next[id] ?? NONE) out.push(id);
    return out;
  }

  /** Throws when the links, membership flags and count disagree. */
  check(): void {
    const seen = new Set<number>();
    let prevId = NONE;
    for (let id = this.head; id !== NONE; id = this.next[id] ?? NONE) {
      if (seen.has(id)) throw new Error(`free queue: cycle at block ${id}`);
      if (this.inQueue[id] !== 1) throw new Error(`free queue: block ${id} linked but not flagged in queue`);
      if ((this.prev[id] ?? NONE) !== prevId) throw new Error(`free queue: block ${id} has a broken prev link`);
      seen.add(id);
      prevId = id;
    }
    if (prevId !== this.tail) throw new Error(`free queue: tail ${this.tail} is not the last linked block ${prevId}`);
    if (seen.size !== this.count) throw new Error(`free queue: count ${this.count} but ${seen.size} linked blocks`);
    for (let id = 0; id < this.inQueue.length; id++) {
      if (this.inQueue[id] === 1 && !seen.has(id)) throw new Error(`free queue: block ${id} flagged but not linked`);
    }
  }

  private assertOut(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.inQueue.length) throw new Error(`free queue: no block ${id}`);
    if (this.inQueue[id] === 1) throw new Error(`free queue: block ${id} is already in the queue`);
  }
}
