// What the two container providers (docker.ts, k8s.ts) share: the bounded set of live sandboxes
// they tear down together, the required-limit checks, output capture, counter growth and a
// bounded availability probe. Kept here so both read and fail alike.
import { Writable } from "node:stream";
import type { Clock } from "../core/clock.js";
import { ArborError, CapacityError } from "../core/errors.js";
import type { SandboxLimits } from "./sandbox.js";
import type { CappedOutput } from "./sandbox-process.js";

/**
 * How long an exec killed at its wall-clock limit may keep its stream open before it is cut (ms). A process the
 * kill misses (a background one, re-parented to the container's init) still holds the output pipe, and Docker and
 * the Kubernetes API keep the exec's stream open until it closes: without a cut the exec never ended.
 */
export const EXEC_KILL_GRACE_MS = 5_000;

/**
 * A provider's live sandboxes, at most `max` (a CapacityError naming `provider` beyond), torn down
 * together by destroyAll.
 */
export class LiveSandboxes<S extends { destroy(): Promise<void> }> {
  private readonly live = new Set<S>();

  /** `noun` names the sandboxes in the teardown error, e.g. "container(s)". */
  constructor(
    private readonly provider: string,
    private readonly max: number,
    private readonly noun: string,
  ) {}

  get size(): number {
    return this.live.size;
  }

  /** Throw when another sandbox would exceed the limit. */
  checkRoom(): void {
    if (this.live.size >= this.max) throw new CapacityError(this.provider, this.max);
  }

  add(sb: S): void {
    this.live.add(sb);
  }

  delete(sb: S): void {
    this.live.delete(sb);
  }

  /** Destroy every live sandbox; throws once, naming how many failed and the first reason. */
  async destroyAll(): Promise<void> {
    const results = await Promise.allSettled([...this.live].map((s) => s.destroy()));
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed.length > 0) {
      throw new ArborError(`sandbox: ${failed.length} ${this.noun} failed to tear down: ${String(failed[0]?.reason)}`, "sandbox");
    }
  }
}

/** Check the limits every container sandbox needs (a config ArborError naming the field otherwise). */
export function checkLimits(l: SandboxLimits | undefined): asserts l is SandboxLimits {
  if (!l || typeof l !== "object") throw new ArborError("sandbox: limits are required", "config");
  positive("limits.cpuSeconds", l.cpuSeconds);
  positive("limits.memoryMb", l.memoryMb);
  positive("limits.wallMs", l.wallMs);
}

/** Throw a config ArborError naming `field` unless `v` is a finite number above 0. */
export function positive(field: string, v: number): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
    throw new ArborError(`sandbox: ${field} must be a positive number, got ${v}`, "config");
  }
}

/** A Writable that feeds a CappedOutput. */
export function outputSink(out: CappedOutput): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk);
      cb();
    },
  });
}

export interface Counters {
  oomKills: number;
  pidsRefused: number;
}

/** How far each counter grew from `before` to `now`. */
export function counterGrowth(before: Counters, now: Counters): Counters {
  return { oomKills: now.oomKills - before.oomKills, pidsRefused: now.pidsRefused - before.pidsRefused };
}

/** Settle `probe` or reject with "no answer within N ms", whichever comes first. */
export async function withinMs<T>(clock: Clock, timeoutMs: number, probe: () => Promise<T>): Promise<T> {
  let timer: { cancel(): void } | undefined;
  const limit = new Promise<never>((_, rej) => {
    timer = clock.setTimer(timeoutMs, () => rej(new Error(`no answer within ${timeoutMs} ms`)));
  });
  try {
    return await Promise.race([probe(), limit]);
  } finally {
    timer?.cancel();
  }
}
