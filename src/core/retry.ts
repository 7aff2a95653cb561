// Riding out a service that is briefly unreachable (a broker or gateway restarting, a cut connection): an operation
// is retried with growing pauses until it succeeds or its attempts are used up. Only for operations that are
// idempotent on the other side — publishes carry a de-duplication id, a program's release may be repeated — so a
// retry after a lost answer never doubles anything.
import type { Clock } from "./clock.js";
import { ArborError } from "./errors.js";

/** Default tries: with pauses of 0.5, 1, 2, 4, 4, … s, about 25 s of outage is ridden out. */
export const DEFAULT_RETRY_ATTEMPTS = 8;

export interface RetryOptions {
  /** Tries in all (default {@link DEFAULT_RETRY_ATTEMPTS}). */
  attempts?: number;
  /** Whether a failure may be retried (default: every failure). */
  retryable?: (error: Error) => boolean;
  /** Hears each failure that is retried. */
  onRetry?: (error: Error, attempt: number) => void;
}

/**
 * Run `op`, retrying after a failure (pauses doubling from 500 ms up to 4 s) while it is retryable, at most
 * `attempts` times in all; the last failure is rethrown, naming `what` and the number of tries.
 */
export async function retrying<T>(what: string, op: () => Promise<T>, clock: Clock, o: RetryOptions = {}): Promise<T> {
  const attempts = o.attempts ?? DEFAULT_RETRY_ATTEMPTS;
  let pause = 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      if (o.retryable !== undefined && !o.retryable(error)) throw error;
      if (attempt >= attempts) throw new ArborError(`${what}: failed ${attempts} times, last: ${error.message}`, "unreachable");
      o.onRetry?.(error, attempt);
      await clock.sleep(pause);
      pause = Math.min(pause * 2, 4000);
    }
  }
}
