// Configuration of the state-aware pause/restore controller (ThunderAgent §B1): thresholds, period,
// acting-token decay, force-resume bound. Defaults come from the ThunderAgent paper and code.
import { ArborError } from "../../core/errors.js";

/** Where the acting-token decay 2^−t enters the usage estimate. */
export type DecayScope = "usage" | "restore" | "off";
/** How a restored program picks its backend among those with room. */
export type RestorePlacement = "most-free" | "best-fit" | "origin";

export interface PauseConfig {
  /**
   * High watermark: a backend whose usage exceeds λmax·C pauses programs until it is back at or
   * below. Default 1.0: the paper (§4.3) says "in practice, we set both value to be 1, as the
   * shared prompt across programs implicitly reserves sufficient memory buffer"; its code
   * (backend/state.py `capacity_overflow`) pauses when usage + buffer > C.
   */
  lambdaMax: number;
  /** Low watermark: only a backend below λmin·C takes restored programs. Default 1.0 (paper). */
  lambdaMin: number;
  /** Period Δt of `tick` in ms. Default 5000 (config.py `scheduler_interval = 5.0`). */
  intervalMs: number;
  /** Time unit of the decay f(t) = 2^−t, in ms. Default 1000: router/state.py counts t in seconds. */
  decayUnitMs: number;
  /**
   * "usage" (default): acting tokens decay in every usage estimate, pause and restore alike, as in
   * the paper's Eq. 7 thrashing check. "restore": ThunderAgent's code
   * (`remaining_capacity_with_decay`) decays only when estimating room for restores and checks
   * pauses against undecayed tokens. "off": no decay.
   */
  decayScope: DecayScope;
  /**
   * "most-free" (default): the largest selected program goes to the backend with the most free
   * room, as ThunderAgent's `_greedy_resume` does (it calls this BFD; in bin-packing terms it is
   * worst-fit-decreasing, which also evens memory across backends). "best-fit": textbook BFD,
   * the backend whose free room is the smallest that still fits. "origin": a paused program goes
   * back only to the backend it was paused from, waiting until that has room, since its KV is
   * there (prefix cache, the engine's host-memory tier) and anywhere else is computed again; a new
   * program goes to the most free one. The force-resume bound still holds (it restores to the origin).
   */
  placement: RestorePlacement;
  /** A held call waiting longer than this is force-resumed. Default 1_800_000 (`_wait_for_resume` 1800 s). */
  forceResumeMs: number;
  /** Tokens reserved per active program for decode headroom. Default 100 (state.py BUFFER_PER_PROGRAM). */
  bufferPerProgram: number;
  /** Programs tracked at most (active + paused); one more is a CapacityError. Default 100_000. */
  maxPrograms: number;
}

export const DEFAULT_PAUSE_CONFIG: Readonly<PauseConfig> = Object.freeze({
  lambdaMax: 1.0,
  lambdaMin: 1.0,
  intervalMs: 5000,
  decayUnitMs: 1000,
  decayScope: "usage",
  placement: "most-free",
  forceResumeMs: 1_800_000,
  bufferPerProgram: 100,
  maxPrograms: 100_000,
});

function bad(field: string, reason: string, value: unknown): never {
  throw new ArborError(`pausing.${field}: ${reason}, got ${JSON.stringify(value)}`, "config");
}

/** Fill defaults and validate; throws a one-line ArborError naming the bad field. */
export function resolvePauseConfig(partial: Partial<PauseConfig> = {}): PauseConfig {
  const c: PauseConfig = { ...DEFAULT_PAUSE_CONFIG, ...partial };
  const positive = (f: "lambdaMax" | "lambdaMin" | "intervalMs" | "decayUnitMs" | "forceResumeMs"): void => {
    const v = c[f];
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) bad(f, "must be a finite number > 0", v);
  };
  positive("lambdaMax");
  positive("lambdaMin");
  positive("intervalMs");
  positive("decayUnitMs");
  positive("forceResumeMs");
  if (c.lambdaMin > c.lambdaMax) bad("lambdaMin", `must be <= lambdaMax (${c.lambdaMax})`, c.lambdaMin);
  if (!Number.isInteger(c.bufferPerProgram) || c.bufferPerProgram < 0) {
    bad("bufferPerProgram", "must be an integer >= 0", c.bufferPerProgram);
  }
  if (!Number.isInteger(c.maxPrograms) || c.maxPrograms < 1) bad("maxPrograms", "must be an integer >= 1", c.maxPrograms);
  if (!["usage", "restore", "off"].includes(c.decayScope)) {
    bad("decayScope", 'must be "usage", "restore" or "off"', c.decayScope);
  }
  if (!["most-free", "best-fit", "origin"].includes(c.placement)) bad("placement", 'must be "most-free", "best-fit" or "origin"', c.placement);
  return c;
}
