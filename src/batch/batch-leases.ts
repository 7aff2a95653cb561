// Leases of the batches out with trainers (the trainer protocol, trainer-server.ts). A trainer that dies holding a
// batch never acks nor requeues it; without a lease the batch stays in flight, no other trainer is handed it, and
// the run waits for an ack that never comes. A batch's lease runs from the moment it is taken, is renewed by the
// trainer's heartbeats, and is held while the weights trained on it are being announced (the engines may take long
// to load them). When it runs out, the batch is given back to the queue for another trainer — unless its weights
// were announced already: then the trainer died between its announcement and its ack, the engines serve what it
// trained on the batch, and training it again would count it twice, so it is acked. I/O-free: timers on a Clock.
import type { Clock, Timer } from "../core/clock.js";
import { ArborError } from "../core/errors.js";

/**
 * Default lease of a batch out with a trainer, ms: the run's default wait for an ack (`train.external.waitMs`), so a
 * trainer that sends no heartbeat loses its batch no sooner than the run would have given up on it.
 */
export const DEFAULT_BATCH_LEASE_MS = 600_000;

/** What becomes of a batch whose lease ran out. */
export type LeaseOutcome = "requeue" | "ack";

interface Lease {
  timer: Timer | undefined;
  /** Weights trained on the batch were announced (and loaded). */
  announced: boolean;
}

/** The leases of the batches in flight: at most as many as the queue holds. */
export class BatchLeases {
  private readonly leases = new Map<string, Lease>();

  constructor(
    private readonly o: {
      leaseMs: number;
      clock: Clock;
      /** Called when a lease runs out, with what to do with its batch (the lease is gone by then). */
      onExpired: (batchId: string, outcome: LeaseOutcome) => void;
    },
  ) {
    if (!Number.isInteger(o.leaseMs) || o.leaseMs < 1) throw new ArborError(`trainer protocol: leaseMs must be an integer >= 1, got ${o.leaseMs}`, "config");
  }

  /** The lease length, ms. */
  get leaseMs(): number {
    return this.o.leaseMs;
  }

  /** A batch was taken: its lease starts now. */
  start(batchId: string): void {
    this.end(batchId);
    const lease: Lease = { timer: undefined, announced: false };
    this.leases.set(batchId, lease);
    this.arm(batchId, lease);
  }

  /** A heartbeat: the lease starts again now. False when the batch holds no lease (not in flight). */
  renew(batchId: string): boolean {
    const lease = this.leases.get(batchId);
    if (lease === undefined) return false;
    if (lease.timer !== undefined) this.arm(batchId, lease);
    return true;
  }

  /** Weights trained on the batch are being announced: no expiry until {@link announced} says how it went. */
  hold(batchId: string): void {
    const lease = this.leases.get(batchId);
    lease?.timer?.cancel();
    if (lease !== undefined) lease.timer = undefined;
  }

  /** The announcement ended (`loaded`: the engines serve the weights): the lease starts again now. */
  announced(batchId: string, loaded: boolean): void {
    const lease = this.leases.get(batchId);
    if (lease === undefined) return;
    if (loaded) lease.announced = true;
    this.arm(batchId, lease);
  }

  /**
   * Where the weights trained on the batch are: being announced now, announced (the engines serve them), or
   * neither (undefined, also for a batch holding no lease).
   */
  weightsOf(batchId: string): "announcing" | "announced" | undefined {
    const lease = this.leases.get(batchId);
    if (lease === undefined) return undefined;
    if (lease.timer === undefined) return "announcing";
    return lease.announced ? "announced" : undefined;
  }

  /** The batch was acked, requeued or withdrawn: its lease ends. */
  end(batchId: string): void {
    this.leases.get(batchId)?.timer?.cancel();
    this.leases.delete(batchId);
  }

  /** Batches holding a lease. */
  get size(): number {
    return this.leases.size;
  }

  private arm(batchId: string, lease: Lease): void {
    lease.timer?.cancel();
    lease.timer = this.o.clock.setTimer(this.o.leaseMs, () => {
      this.leases.delete(batchId);
      this.o.onExpired(batchId, lease.announced ? "ack" : "requeue");
    });
  }
}
