// Which orchestrator process a deployment's trainer-api serves: one run trains at a time, so each orchestrator that
// starts (`orchestrator-started`, loop/brokered-trainer.ts) supersedes the ones before it, whose batches are dropped.
// Bounded: only the last `limit` superseded sessions are remembered (older ones' batches are long gone).

/** The sessions superseded so far, in start order; see the file header. */
export class OrchestratorSessions {
  private current: string | undefined;
  private readonly superseded = new Set<string>();

  constructor(private readonly limit = 1024) {}

  /** An orchestrator started: the one before it (if any) is superseded. */
  started(session: string): void {
    if (this.current !== undefined && this.current !== session) this.superseded.add(this.current);
    this.current = session;
    for (const old of this.superseded) {
      if (this.superseded.size <= this.limit) break;
      this.superseded.delete(old);
    }
  }

  /** Whether batches of `session` are stale (a later orchestrator started); false for none or an unknown one. */
  isSuperseded(session: string | undefined): boolean {
    return session !== undefined && this.superseded.has(session);
  }
}
