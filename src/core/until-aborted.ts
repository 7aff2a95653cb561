// Waiting on shared work under one's own signal: several waiters share one promise (a lookup, a group's reward),
// and each stops waiting when its own signal aborts, without cancelling the work for the others.

/** `work`'s result, or `signal`'s reason as soon as it is aborted (the work itself is left to settle unheard). */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
