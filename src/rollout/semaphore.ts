// A counting semaphore for bounding concurrent programs; waiters are served in FIFO order.

/** FIFO counting semaphore. */
export class Semaphore {
  private free: number;
  private readonly waiters: (() => void)[] = [];

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`semaphore capacity must be >= 1, got ${capacity}`);
    this.free = capacity;
  }

  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else if (this.free < this.capacity) this.free++;
    else throw new Error("semaphore released more often than acquired");
  }

  /** Run `fn` holding one permit. */
  async with<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}
