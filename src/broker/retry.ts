// Riding out a broker that is briefly unreachable (a restart, a cut connection): a publish is retried with
// growing pauses until it succeeds or `attempts` are used up. Only for operations that are idempotent on the
// broker — publishes carry a de-duplication id — so a retry after a lost acknowledgement never doubles anything.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";

/** Default tries: with pauses of 0.5, 1, 2, 4, 4, … s, about 25 s of outage is ridden out. */
export const DEFAULT_BROKER_ATTEMPTS = 8;

/**
 * Run `op`, retrying after a failure (pauses doubling from 500 ms up to 4 s) at most `attempts` times in all; the
 * last failure is rethrown, naming `what` and the number of tries. `onRetry` hears each failure that is retried.
 */
export async function retryBroker<T>(what: string, op: () => Promise<T>, clock: Clock, attempts = DEFAULT_BROKER_ATTEMPTS, onRetry?: (error: Error, attempt: number) => void): Promise<T> {
  let pause = 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      if (attempt >= attempts) throw new ArborError(`${what}: failed ${attempts} times, last: ${error.message}`, "broker_unreachable");
      onRetry?.(error, attempt);
      await clock.sleep(pause);
      pause = Math.min(pause * 2, 4000);
    }
  }
}
