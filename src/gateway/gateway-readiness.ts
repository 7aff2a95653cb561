// What GET /readyz of a gateway run as a service checks: the caller's own checks (e.g. its store), then
// that at least one backend is in rotation and answers its health check now. Draining is the probes'.
import type { Backend } from "../backends/backend.js";
import type { Clock, Timer } from "../core/clock.js";
import type { HealthLoop } from "./health/health-loop.js";

/** Longest wait for one backend's health answer during a readiness check, ms. */
export const READINESS_CHECK_MS = 2000;

/**
 * Why the gateway cannot serve now, or undefined when it can. Backends are asked at once; the first
 * healthy one in rotation settles it, and each is given {@link READINESS_CHECK_MS} at most.
 */
export async function gatewayNotReady(args: {
  backends: Backend[];
  health: HealthLoop;
  clock: Clock;
  extra?: () => Promise<string | undefined> | string | undefined;
}): Promise<string | undefined> {
  const extra = await args.extra?.();
  if (extra !== undefined) return extra;
  const inRotation = args.backends.filter((b) => args.health.tracker.isUp(b.name));
  if (inRotation.length === 0) return `no backend in rotation (${args.backends.map((b) => b.name).join(", ")} all down)`;
  const failures = await Promise.all(inRotation.map((b) => healthWithin(b, args.clock)));
  if (failures.some((f) => f === undefined)) return undefined;
  return `no backend answers its health check: ${inRotation.map((b, i) => `${b.name}: ${failures[i]}`).join("; ")}`;
}

async function healthWithin(b: Backend, clock: Clock): Promise<string | undefined> {
  let timer: Timer | undefined;
  const late = new Promise<string>((resolve) => {
    timer = clock.setTimer(READINESS_CHECK_MS, () => resolve(`no answer within ${READINESS_CHECK_MS} ms`));
  });
  try {
    return await Promise.race([b.health().then(() => undefined), late]);
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    timer?.cancel();
  }
}
