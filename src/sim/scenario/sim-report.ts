// The result of `arbor sim <workload> --systems a,b,…` (issue 18): one workload run once per named system on the
// virtual clock, as plain JSON. The report renderer (HTML, PNG) and `docs/reproduction.md` read only this shape,
// and a real run's report (`arbor report <run dir>`) is converted into it, so every report looks the same.
// Every number is a plain finite number; the same workload, systems and seed give byte-identical JSON.

/** Format tag written first in every report. Bump on an incompatible change. */
export const SIM_REPORT_FORMAT = "arbor-sim-report/1";

/** One point of a time series: clock time since the start, ms, and the value. */
export interface SeriesPoint {
  tMs: number;
  value: number;
}

/** What a workload is and where its figures come from. */
export interface SimWorkloadInfo {
  name: string;
  /** `rollout` (groups of samples, one or more iterations), `agent` (multi-turn programs with tools), `replay`. */
  kind: "rollout" | "agent" | "replay";
  /** One line: what it models. */
  description: string;
  /** Where each figure comes from (paper, table, section), one entry per figure or group of figures. */
  sources: string[];
  /**
   * The scale actually run: GPUs, engines, requests or programs (scaled by `runScale`, the fraction of the workload
   * run), group size, output lengths, cost profile, …
   */
  scale: Record<string, number | string>;
}

/** The headline figures of one system on one workload. */
export interface SimSummary {
  /** Requests (rollout: samples; agent: model calls) the workload issued, and how each ended. */
  requests: number;
  completed: number;
  /** Ended without completing (aborted, cut by a limit); with `completed` it must equal `requests`. */
  aborted: number;
  /** Agent workloads: programs issued and finished. Rollout workloads: groups. */
  programs: number;
  /** Time from start until the last request ended (rollout: one iteration's time, or all iterations'), ms. */
  makespanMs: number;
  /** Mean time of one iteration (rollout), or of the whole run (agent), ms. */
  iterationMs: number;
  outputTokens: number;
  /** Output tokens per second of simulated time, whole cluster. */
  throughputTokensPerS: number;
  /** Agent workloads: model calls (steps) per simulated minute; rollout: requests per minute. */
  stepsPerMin: number;
  /** Time from the 90th-percentile request end to the last (the last 10% of requests), ms. */
  tailMs: number;
  /** Request (rollout) or program (agent) end time percentiles since the start, ms. */
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  preemptions: number;
  /** Prompt/context tokens computed more than once (after eviction, preemption, a move between engines). */
  recomputedTokens: number;
  /** Highest KV blocks in use on any engine over the run, as a fraction of its capacity (never above 1). */
  peakKvUsage: number;
  /** Async rollout: mean policy-version lag of the trained tokens; 0 in synchronous runs. */
  meanStaleness: number;
}

/** One system's run of the workload. */
export interface SimSystemResult {
  /** The system's name (`verl-like`, `sglang-router`, `thunderagent`, `seer`, `arbor`, `oracle`, …). */
  system: string;
  /** One line: what the system is made of (scheduling policy, router, pausing, divided rollout, …). */
  description: string;
  summary: SimSummary;
  series: {
    /** Output tokens per second over time, whole cluster (fixed buckets). */
    throughput: SeriesPoint[];
    /** Fraction of each engine's KV blocks in use over time; one series per engine, by engine name. */
    kvUsage: Record<string, SeriesPoint[]>;
    /** Preemptions and recomputed tokens, cumulative over time. */
    preemptions: SeriesPoint[];
    recomputedTokens: SeriesPoint[];
    /** Async rollout: mean staleness of each trained batch at the time it was taken (empty when sync). */
    staleness: SeriesPoint[];
  };
  /**
   * Request (rollout) or program (agent) end times since the start, ms: the completion CDF at 101 points
   * (0th, 1st, …, 100th percentile), so the report can draw the CDF and mark the tail.
   */
  completionPercentilesMs: number[];
}

/** A system's figures relative to the baseline system (`verl-like` where it ran, else the first system). */
export interface SimRatio {
  system: string;
  /** baseline iterationMs / system iterationMs (> 1: faster). */
  speedup: number;
  /** system throughput / baseline throughput. */
  throughput: number;
  /** 1 − system tailMs / baseline tailMs (0.72: tail 72% shorter). */
  tailReduction: number;
}

/** The whole report of one `arbor sim` run. */
export interface SimReport {
  format: typeof SIM_REPORT_FORMAT;
  workload: SimWorkloadInfo;
  seed: number;
  baseline: string;
  systems: SimSystemResult[];
  ratios: SimRatio[];
}
