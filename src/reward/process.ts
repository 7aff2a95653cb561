// The process reward (Forge's dense process signal, TECHNIQUES §E): penalties for malformed tool
// calls (unclosed or nameless markup, or a call naming a tool the environment does not have), for
// tool calls that failed, and for calls whose prose mixes languages. Each penalty is credited to
// the call that caused it, so reward-to-go sees where the program went wrong.
import { parseToolCalls } from "../model/markup.js";
import { ArborError } from "../core/errors.js";
import { callsInOrder, positionOfCall, rescaleSteps } from "./call-steps.js";
import { isLanguageMixed, type LanguageMixOptions } from "./language-mix.js";
import type { RewardContext, StepwiseRewardFn, StepwiseValue } from "./reward-fn.js";

export interface ProcessRewardOptions {
  /** Penalty per malformed tool call (default 0.5). */
  malformedToolCall?: number;
  /** Penalty per tool call that ran and failed (default 0.25). */
  failedToolCall?: number;
  /** Penalty per call whose prose mixes languages (default 0.5). */
  languageMix?: number;
  /** The reward never goes below this (default -1). */
  floor?: number;
  /** Thresholds of the language-mix detector. */
  languageMixThresholds?: LanguageMixOptions;
}

/** Counts behind a program's process reward. */
export interface ProcessCounts {
  malformed: number;
  failed: number;
  mixedCalls: number;
}

// Arbor's own trajectory events (hygiene, set-up) are not tool calls of the model.
const isArborEvent = (tool: string): boolean => tool.startsWith("arbor:");

/** Per-call penalty counts of a program. */
export function processCounts(ctx: RewardContext, opts: ProcessRewardOptions = {}): ProcessCounts[] {
  const calls = callsInOrder(ctx.trajectory);
  const known = new Set(ctx.env.tools().map((t) => t.name));
  const out = calls.map((c): ProcessCounts => ({
    malformed: parseToolCalls(c.outputText).malformed.length,
    failed: 0,
    mixedCalls: isLanguageMixed(c.outputText, opts.languageMixThresholds) ? 1 : 0,
  }));
  if (calls.length === 0) return out;
  for (const ev of ctx.trajectory.tools) {
    if (isArborEvent(ev.tool) || ev.ok) continue;
    const at = out[positionOfCall(calls, ev.callIndex)] as ProcessCounts;
    // A tool the environment does not have is the model's formatting error, not a tool failure.
    if (known.size > 0 && !known.has(ev.tool)) at.malformed++;
    else at.failed++;
  }
  return out;
}

function penalty(name: string, v: number | undefined, dflt: number): number {
  const p = v ?? dflt;
  if (!(Number.isFinite(p) && p >= 0)) throw new ArborError(`reward.process: ${name} must be a finite number >= 0, got ${p}`, "config");
  return p;
}

/** Create the `process` reward: −Σ penalties over the program's calls, floored. */
export function createProcessReward(opts: ProcessRewardOptions = {}): StepwiseRewardFn {
  const malformed = penalty("malformedToolCall", opts.malformedToolCall, 0.5);
  const failed = penalty("failedToolCall", opts.failedToolCall, 0.25);
  const mixed = penalty("languageMix", opts.languageMix, 0.5);
  const floor = opts.floor ?? -1;
  if (!(Number.isFinite(floor) && floor <= 0)) throw new ArborError(`reward.process: floor must be a finite number <= 0, got ${floor}`, "config");
  return {
    name: "process",
    compute(ctx: RewardContext): StepwiseValue {
      const steps = processCounts(ctx, opts).map((c) => 0 - (malformed * c.malformed + failed * c.failed + mixed * c.mixedCalls));
      const raw = steps.reduce((a, b) => a + b, 0);
      const value = Math.max(floor, raw);
      return { value, steps: rescaleSteps(steps, raw, value) };
    },
  };
}
