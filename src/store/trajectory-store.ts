// The TrajectoryStore interface: where runs, groups, programs, their calls (exact tokens and
// logprobs), tool events, terminations and rewards are recorded and read back for training.
import type {
  Call,
  ContextEvent,
  Group,
  Program,
  Reward,
  Termination,
  TerminationKind,
  ToolEvent,
  TraceSink,
  Trajectory,
} from "../core/types.js";

/** Every termination kind, in a fixed order (used to report zero counts too). */
export const TERMINATION_KINDS: readonly TerminationKind[] = [
  "completed",
  "max_turns",
  "max_tokens",
  "context_overflow",
  "tool_crash",
  "agent_error",
  "engine_error",
  "sandbox_error",
  "timeout",
  "aborted",
  "sandbox_oom",
  "hygiene_violation",
];

/** What `createRun` needs. */
export interface NewRun {
  id: string;
  name: string;
  /** The run's resolved configuration, as JSON text. */
  configJson: string;
  startedAt: number;
}

/** A run as stored. */
export interface RunRecord extends NewRun {
  endedAt?: number;
}

/** Aggregates over one run. */
export interface RunStats {
  programs: number;
  /** Programs without a termination yet. */
  unfinished: number;
  calls: number;
  promptTokens: number;
  outputTokens: number;
  /** Count of ended programs per termination kind (every kind present, 0 when none). */
  terminations: Record<TerminationKind, number>;
  /** Programs that have a reward. */
  rewarded: number;
  /** Mean reward total over rewarded programs; null when none has a reward. */
  meanReward: number | null;
}

/**
 * The trajectory store. Every write either succeeds durably or throws: unknown ids, duplicates
 * and out-of-order lifecycle steps are errors, never silently dropped or merged.
 */
export interface TrajectoryStore extends TraceSink {
  /** Start a run. Throws if the id exists. */
  createRun(run: NewRun): void;
  /** Mark a run finished. Throws if unknown or already finished. */
  finishRun(id: string, endedAt: number): void;
  /** Look up one run. */
  getRun(id: string): RunRecord | undefined;
  /** All runs, oldest first. */
  listRuns(): RunRecord[];
  /** Create a group in an existing run. `programIds` may be empty and is filled by `createProgram`. */
  createGroup(group: Group): void;
  /** Create a program in an existing run and group (same run and task). Appends it to the group if absent. */
  createProgram(program: Program): void;
  /** Record one finished call of an active program. Durable when it returns. */
  recordCall(call: Call): void;
  /** Record one tool invocation of an active program. */
  recordTool(event: ToolEvent): void;
  /** Record one context-management event of an active program (read back in record order). */
  recordContextEvent(event: ContextEvent): void;
  /** End a program. Throws if the program is unknown or already ended. */
  endProgram(programId: string, termination: Termination, endedAt: number): void;
  /** Attach the reward of an ended program. Throws if unknown, not ended, or already rewarded. */
  setReward(programId: string, reward: Reward): void;
  /** One program with its calls (by index), tools (in record order) and reward; undefined if unknown. */
  getTrajectory(programId: string): Trajectory | undefined;
  /** Every trajectory of a run, programs in creation order. Throws if the run is unknown. */
  listTrajectories(runId: string): Trajectory[];
  /** Every group of a run, in creation order. Throws if the run is unknown. */
  listGroups(runId: string): Group[];
  /** Aggregates over a run. Throws if the run is unknown. */
  stats(runId: string): RunStats;
  /** Release the store; later calls throw. Idempotent. */
  close(): void;
}
