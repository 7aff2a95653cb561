// A rollout that taught nothing because nothing ran: every program of a batch ended because its sandbox failed it
// (it could not start, or ran out of memory), none because of what the policy did. Training on such a batch (every
// reward 0) and going on would report a normal run over programs that never reached the model, exiting 0; the run
// stops instead and says why. A sandbox that fails every program is a setting to fix (Docker not running, too
// little memory), not a passing fault. Engine errors are not counted: a gateway or engine restart fails the calls
// in flight, and a deployment rides that out (the next iteration runs on the restarted service).
import { ArborError } from "../core/errors.js";
import type { TerminationKind, Trajectory } from "../core/types.js";

/** Terminations that say the sandbox failed the program, not the policy. */
export const INFRASTRUCTURE_FAILURES: readonly TerminationKind[] = ["sandbox_error", "sandbox_oom"];

/**
 * The error to stop a run with when every one of a batch's programs ended in a sandbox failure (naming the
 * kinds, counts and the first program's detail), else undefined. An empty batch is not judged here.
 */
export function infrastructureFailure(step: number, trajectories: readonly Trajectory[]): ArborError | undefined {
  if (trajectories.length === 0) return undefined;
  const counts = new Map<TerminationKind, number>();
  for (const t of trajectories) {
    const kind = t.program.termination?.kind;
    if (kind === undefined || !INFRASTRUCTURE_FAILURES.includes(kind)) return undefined;
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  const first = trajectories[0] as Trajectory;
  const kinds = [...counts].map(([k, n]) => `${k} ${n}`).join(", ");
  return new ArborError(
    `iteration ${step}: all ${trajectories.length} programs ended in sandbox failures (${kinds}), none by the policy's doing, ` +
      `so there is nothing to learn from; the first, ${first.program.id}: ${first.program.termination?.detail ?? "(no detail)"}`,
    "rollout_failed",
  );
}
