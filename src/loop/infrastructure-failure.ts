// A rollout that taught nothing because nothing ran: every program of a batch ended because the infrastructure
// failed it, none because of what the policy did. Training on such batches (every reward 0) and going on would
// report a normal run over programs that never reached the model, exiting 0; the run stops instead and says why.
// A sandbox that fails every program is a setting to fix (Docker not running, too little memory), not a passing
// fault: one such batch stops the run. An engine error can be passing: a gateway or engine restart fails the calls
// in flight, and a deployment rides that out (the next iteration runs on the restarted service; in async mode the
// programs a restart failed can fill the window's batches). Only an engine that fails every program of
// ENGINE_FAILURE_ITERATIONS batches in a row (a wrong model, an engine that cannot serve) stops the run.
import { ArborError } from "../core/errors.js";
import type { TerminationKind, Trajectory } from "../core/types.js";

/** Terminations that say the sandbox failed the program, not the policy. */
export const SANDBOX_FAILURES: readonly TerminationKind[] = ["sandbox_error", "sandbox_oom"];

/** Batches in a row whose every program failed, engine errors among them, that stop a run. */
export const ENGINE_FAILURE_ITERATIONS = 3;

/** Watches a run's batches, one after the other, for infrastructure that failed every program. */
export class InfrastructureWatch {
  private engineStreak = 0;

  constructor(private readonly engineIterations = ENGINE_FAILURE_ITERATIONS) {}

  /**
   * The error to stop the run with at batch `step` (naming the kinds, counts and the first program's detail), else
   * undefined: every program failed by its sandbox, or every program of the last `engineIterations` batches by
   * its sandbox or an engine. An empty batch stops nothing (and, as any batch not all failed, ends a streak).
   */
  check(step: number, trajectories: readonly Trajectory[]): ArborError | undefined {
    const counts = failureCounts(trajectories);
    if (counts === undefined) {
      this.engineStreak = 0;
      return undefined;
    }
    const first = trajectories[0] as Trajectory;
    const kinds = [...counts].map(([k, n]) => `${k} ${n}`).join(", ");
    const cause = `the first, ${first.program.id}: ${first.program.termination?.detail ?? "(no detail)"}`;
    if (!counts.has("engine_error")) {
      return new ArborError(`iteration ${step}: all ${trajectories.length} programs ended in sandbox failures (${kinds}), none by the policy's doing, so there is nothing to learn from; ${cause}`, "rollout_failed");
    }
    this.engineStreak++;
    if (this.engineStreak < this.engineIterations) return undefined;
    return new ArborError(
      `iteration ${step}: all programs of the last ${this.engineIterations} iterations ended in engine or sandbox failures (this one: ${kinds}), ` +
        `none by the policy's doing, so there is nothing to learn from (is the engine serving the model?); ${cause}`,
      "rollout_failed",
    );
  }
}

/** Each failure kind's count when every program ended in a sandbox or engine failure, else undefined. */
function failureCounts(trajectories: readonly Trajectory[]): Map<TerminationKind, number> | undefined {
  if (trajectories.length === 0) return undefined;
  const counts = new Map<TerminationKind, number>();
  for (const t of trajectories) {
    const kind = t.program.termination?.kind;
    if (kind === undefined || (kind !== "engine_error" && !SANDBOX_FAILURES.includes(kind))) return undefined;
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return counts;
}
