// A Seer-like RL rollout workload (TECHNIQUES §B5, Seer Table 3): many groups of G samples of one
// prompt, output lengths heavy-tailed (log-normal, capped at the max generation length) with the
// mean/max ratio of a Table 3 workload, scaled down so a simulated iteration runs in seconds.
// Lengths within a group are correlated (a per-group log-scale plus per-sample noise): that is what
// Seer's group length estimate exploits.
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import type { OrchestratorTask } from "../rollout/orchestrator/orchestrator.js";

/** Seer Table 3: per-iteration requests, group size, max and mean output tokens. */
export const SEER_TABLE3 = {
  moonlight: { requests: 3200, groupSize: 8, maxTokens: 65_536, meanTokens: 22_386 },
  "qwen2-vl-72b": { requests: 9600, groupSize: 16, maxTokens: 40_960, meanTokens: 7_615 },
  "kimi-k2": { requests: 6400, groupSize: 8, maxTokens: 98_304, meanTokens: 38_959 },
} as const;

export interface SeerWorkloadOptions {
  groups: number;
  groupSize: number;
  /** Max output tokens (the scaled-down max generation length). */
  maxTokens: number;
  /** Target mean output length / maxTokens (Moonlight: 22,386 / 65,536 ≈ 0.342). */
  meanRatio: number;
  /** Prompt length range, tokens (inclusive). */
  promptTokens: [number, number];
  /** Spread of the per-group log-scale (between groups). */
  groupSigma: number;
  /** Spread of the per-sample log-scale (within a group). */
  sampleSigma: number;
  vocabSize: number;
  /** Prompt token ids are drawn from [minTokenId, vocabSize). */
  minTokenId: number;
  seed: number;
}

/** One task of the workload, with its prompt's token ids and each sample's true output length. */
export interface SeerTask extends OrchestratorTask {
  promptTokenIds: number[];
  oracleLengths: number[];
}

/** Generate the workload; the log-scale location is solved so the mean output is meanRatio·maxTokens. */
export function generateSeerWorkload(o: SeerWorkloadOptions): SeerTask[] {
  for (const [k, v] of [["groups", o.groups], ["groupSize", o.groupSize], ["maxTokens", o.maxTokens]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new ArborError(`seer workload: ${k} must be an integer >= 1, got ${v}`, "config");
  }
  if (!(o.meanRatio > 0 && o.meanRatio < 1)) throw new ArborError(`seer workload: meanRatio must be in (0, 1), got ${o.meanRatio}`, "config");
  const [pmin, pmax] = o.promptTokens;
  if (!(Number.isInteger(pmin) && Number.isInteger(pmax) && pmin >= 1 && pmax >= pmin)) {
    throw new ArborError(`seer workload: promptTokens must be integers 1 <= min <= max, got [${pmin}, ${pmax}]`, "config");
  }
  const rng = new Rng(o.seed);
  const zg = Array.from({ length: o.groups }, () => rng.normal());
  const zs = Array.from({ length: o.groups * o.groupSize }, () => rng.normal());
  const lengthsAt = (mu: number): number[] =>
    zs.map((z, i) => Math.max(1, Math.min(o.maxTokens, Math.round(Math.exp(mu + o.groupSigma * (zg[Math.floor(i / o.groupSize)] as number) + o.sampleSigma * z)))));
  const meanAt = (mu: number): number => lengthsAt(mu).reduce((a, b) => a + b, 0) / zs.length;
  // The mean grows with mu: bisect mu so the mean hits the target.
  const target = o.meanRatio * o.maxTokens;
  let lo = -10;
  let hi = Math.log(o.maxTokens) + 10;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (meanAt(mid) < target) lo = mid;
    else hi = mid;
  }
  const lengths = lengthsAt((lo + hi) / 2);
  return Array.from({ length: o.groups }, (_, g) => {
    const prng = rng.fork(`prompt:${g}`);
    const n = prng.int(pmin, pmax);
    const promptTokenIds = Array.from({ length: n }, () => prng.int(o.minTokenId, o.vocabSize - 1));
    return { id: `task${g}`, promptTokens: n, maxTokens: o.maxTokens, promptTokenIds, oracleLengths: lengths.slice(g * o.groupSize, (g + 1) * o.groupSize) };
  });
}
