// Waiting for a deployment's gateway before a run starts: `arbor run --cluster` may be started before (or without)
// `arbor serve gateway`, and the wait may last a minute, so it says once that it waits, and fails naming the URL,
// the last answer and the likely cause.
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";

/**
 * Resolves once GET `${url}/readyz` answers 200; throws with the last answer after `timeoutMs`; `log` is told
 * of the first miss.
 */
export async function waitReady(url: string, clock: Clock, timeoutMs: number, log: (line: string) => void): Promise<void> {
  const until = clock.now() + timeoutMs;
  for (let missed = false; ; missed = true) {
    let last: string;
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) });
      if (res.ok) return;
      last = `${res.status} ${await res.text()}`;
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    if (clock.now() >= until) throw new ArborError(`gateway ${url} is not ready after ${timeoutMs / 1000} s (${last}); is arbor serve gateway running?`, "backend_unreachable");
    // Said once: the wait may last a minute.
    if (!missed) log(`gateway  ${url} not ready yet (${last}); waiting up to ${timeoutMs / 1000} s`);
    await clock.sleep(500);
  }
}
