// Per program, the tokens of its last finished request, whose KV may still be cached: what a pause moves to
// L2/L3 (Scheduler.pauseProgram). Bounded by tokens, least recently finished first out. Why: an engine serving
// a gateway is never told that a program ended (only the simulator calls endProgram), so without a bound it
// kept every program's last context for good, and a prefill engine of divided rollout one per request. A
// program whose tail is dropped is only paused without its move (its blocks stay in L1 for LRU eviction).

/** Token ids of programs' last requests, bounded by their total length. */
export class ProgramTails {
  private readonly tails = new Map<string, Uint32Array>();
  private tokens = 0;

  /** @param maxTokens the most tokens kept over all programs (a program's own tail may alone exceed it: then it is not kept). */
  constructor(readonly maxTokens: number) {
    if (!(Number.isInteger(maxTokens) && maxTokens >= 0)) throw new RangeError(`ProgramTails: maxTokens must be an integer >= 0, got ${maxTokens}`);
  }

  /** Remember `tokens` (kept as given: the caller no longer changes them) as the program's latest, dropping the oldest over the bound. */
  set(programId: string, tokens: Uint32Array): void {
    this.delete(programId);
    if (tokens.length > this.maxTokens) return;
    this.tails.set(programId, tokens);
    this.tokens += tokens.length;
    while (this.tokens > this.maxTokens) {
      const oldest = this.tails.keys().next().value as string;
      this.delete(oldest);
    }
  }

  /** Take the program's tail out (undefined when none is kept). */
  take(programId: string): Uint32Array | undefined {
    const t = this.tails.get(programId);
    if (t !== undefined) this.delete(programId);
    return t;
  }

  delete(programId: string): void {
    const t = this.tails.get(programId);
    if (t === undefined) return;
    this.tails.delete(programId);
    this.tokens -= t.length;
  }

  /** Programs and tokens kept. */
  get size(): { programs: number; tokens: number } {
    return { programs: this.tails.size, tokens: this.tokens };
  }
}
