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

/** What opening a store ended: runs whose process had died, and the programs they left active (now `aborted`). */
export interface Recovered {
  runs: string[];
  programs: string[];
}

/**
 * The trajectory store, asynchronous so that a store may live in another thread, process or
 * machine. Every write's promise resolves once the write is durable and rejects when it is not
 * made: unknown ids, duplicates and out-of-order lifecycle steps are errors, never silently
 * dropped or merged, and a refused write leaves nothing behind. Writes of one caller apply in the
 * order they were made, and a read sees every write its caller made before it (awaited or not).
 * Every implementation passes the contract suite in trajectory-store.contract.ts.
 */
export interface TrajectoryStore extends TraceSink {
  /** Start a run. Rejects if the id exists. */
  createRun(run: NewRun): Promise<void>;
  /** Mark a run finished. Rejects if unknown or already finished. */
  finishRun(id: string, endedAt: number): Promise<void>;
  /**
   * Continue a finished run (`arbor run --resume`) in this process: its end time is cleared and this process
   * becomes its owner, so its next iterations' groups belong to it. Rejects if unknown or still open in another
   * process (a run whose process died is ended as soon as the store is opened); a run this process holds open
   * (reopened already, a retried write) is left as it is.
   */
  reopenRun(id: string): Promise<void>;
  /** Look up one run. */
  getRun(id: string): Promise<RunRecord | undefined>;
  /** All runs, oldest first. */
  listRuns(): Promise<RunRecord[]>;
  /** Create a group in an existing run. `programIds` may be empty and is filled by `createProgram`. */
  createGroup(group: Group): Promise<void>;
  /** Create a program in an existing run and group (same run and task). Appends it to the group if absent. */
  createProgram(program: Program): Promise<void>;
  /** Record one finished call of an active program. Resolves once the call is durable. */
  recordCall(call: Call): Promise<void>;
  /** Record one tool invocation of an active program. */
  recordTool(event: ToolEvent): Promise<void>;
  /** Record one context-management event of an active program (read back in record order). */
  recordContextEvent(event: ContextEvent): Promise<void>;
  /** End a program. Rejects if the program is unknown or already ended. */
  endProgram(programId: string, termination: Termination, endedAt: number): Promise<void>;
  /** Attach the reward of an ended program. Rejects if unknown, not ended, or already rewarded. */
  setReward(programId: string, reward: Reward): Promise<void>;
  /** One program with its calls (by index), tools (in record order) and reward; undefined if unknown. */
  getTrajectory(programId: string): Promise<Trajectory | undefined>;
  /** Every trajectory of a run, programs in creation order. Rejects if the run is unknown. */
  listTrajectories(runId: string): Promise<Trajectory[]>;
  /** Every group of a run, in creation order. Rejects if the run is unknown. */
  listGroups(runId: string): Promise<Group[]>;
  /** Aggregates over a run. Rejects if the run is unknown. */
  stats(runId: string): Promise<RunStats>;
  /**
   * A run's programs not ended yet, in creation order, with how many calls each has recorded: what a restarted
   * gateway takes back (ids and counts only: reading the trajectories of a long run would be its whole store).
   * Rejects if the run is unknown.
   */
  activePrograms(runId: string): Promise<{ id: string; calls: number }[]>;
  /**
   * What opening the store ended: unfinished runs whose process is gone are finished, and their
   * active programs ended as `aborted` with the reason, before the store is handed out.
   */
  readonly recovered: Recovered;
  /** Commit what was written, then release the store; later calls reject. Idempotent. */
  close(): Promise<void>;
}
