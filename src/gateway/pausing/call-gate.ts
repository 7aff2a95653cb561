// The hook the gateway calls around every upstream call so that a scheduler (ThunderAgent-style
// pausing, PauseGate) can hold, place and release calls without the gateway knowing how.

/**
 * What the gateway calls for each inference call. The contract: every `beforeCall` that resolves
 * is followed by exactly one `afterCall` (a usable answer) or `onCallAbort` (anything else); a
 * `beforeCall` that rejects needs neither (the gate has undone its own bookkeeping).
 */
export interface CallGate {
  /**
   * A call of `programId` is about to go upstream. Resolves with the backend name it must go to,
   * possibly after holding it (the program is paused). Rejects with `signal.reason` when the
   * signal aborts while held, a CapacityError when too many calls are held, an ArborError when the
   * program was released while held or the gate closed.
   * `promptTokens`: the best known size of the call's context (prompt tokens, or an estimate).
   * `preferredBackend`: the router's pick, used only to place a program the gate has not placed yet.
   */
  beforeCall(programId: string, promptTokens: number, signal?: AbortSignal, preferredBackend?: string): Promise<string>;
  /** The call returned a usable answer; `totalTokens` = prompt + output tokens (the program's KV footprint). */
  afterCall(programId: string, totalTokens: number): void;
  /** The call failed, was cancelled, or its answer was unusable. */
  onCallAbort(programId: string): void;
  /** The program ended (explicit release or idle timeout): its held calls fail, its engine state is let go. */
  onRelease(programId: string): void;
  /** A backend left rotation (`up` false) or came back: the gate stops placing calls there meanwhile. */
  setBackendUp(backend: string, up: boolean): void;
  /** Stop scheduling, fail every held call, and wait for engine operations already started. */
  close(): Promise<void>;
}
