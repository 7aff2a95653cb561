// The rollout scheduling contract: which request (or chunk of a request) runs on which inference
// instance, and when. A policy is an I/O-free state machine: the orchestrator tells it of arriving
// groups and finished chunks, and asks it for placements given the instances' current state, so the
// simulator and a real rollout drive the same class.

/** One sample of a group: a generation request as the scheduler sees it. */
export interface RolloutRequest {
  id: string;
  groupId: string;
  /** Index of the sample within its group (0 is the group's first request). */
  index: number;
  promptTokens: number;
  /** Output budget of the whole request. */
  maxTokens: number;
  /** True output length, known only in simulation; only evaluation policies (oracle-lfs) may read it. */
  oracleLength?: number;
}

/** A group of n samples of one task, arriving together. */
export interface RolloutGroupSpec {
  id: string;
  requests: RolloutRequest[];
}

/** An inference instance as the scheduler sees it when asked for placements. */
export interface InstanceView {
  name: string;
  /** KV capacity of the instance, tokens. */
  kvCapacityTokens: number;
  /**
   * KV the chunks placed and not yet ended hold now: their context so far (prompt ‖ generated),
   * counted from placement, so queued chunks count too. Their future growth is not reserved.
   */
  usedKvTokens: number;
  /** Chunks placed on the instance and not yet ended (running or queued in its engine). */
  active: number;
  /** Chunks the instance runs at once (its engine's max sequences). */
  maxActive: number;
}

/** One decision: run the next `maxTokens` of a request on an instance. */
export interface Placement {
  requestId: string;
  instance: string;
  /** Tokens this chunk may generate (the whole remaining budget when the policy does not divide). */
  maxTokens: number;
  /** Tokens the request generated before this chunk (the chunk continues from prompt ‖ them). */
  generated: number;
  /** Lower runs sooner within an instance (engines with a priority queue may use it). */
  priority: number;
}

/** A rollout scheduling policy (one file per policy, registered in registry.ts). */
export interface RolloutScheduler {
  readonly name: string;
  /** A group's requests become schedulable. Request ids must be new. */
  addGroup(group: RolloutGroupSpec, now: number): void;
  /**
   * A placed chunk ended after generating `tokens` tokens. `finished` = the request is complete
   * (stop token or budget); otherwise it is ready for its next chunk (chunk budget spent, or the
   * chunk was aborted — e.g. by a weight sync — and continues later: partial rollout).
   */
  onChunkEnd(requestId: string, tokens: number, finished: boolean, now: number): void;
  /** Placements to start now; each request has at most one chunk placed at a time. */
  next(instances: readonly InstanceView[], now: number): Placement[];
  /** Requests added and not yet finished. */
  unfinished(): number;
}

/** Options shared by the policies (each reads the ones it uses). */
export interface SchedulerOptions {
  /** Divided rollout: tokens per chunk (default: the whole budget, i.e. no division). */
  chunkTokens?: number;
  /** A request ready for longer than this (ms) is served before all others (starvation guard). */
  starvationMs?: number;
  /** Divided rollout: keep a continuation on its previous chunk's instance when it has room (default true). */
  kvAffinity?: boolean;
}
