// A ThunderAgent-like multi-turn agent workload: many programs started together (an RL rollout
// batch), a varying number of turns each, heavy-tailed (lognormal) tool latency, and contexts that
// grow by every tool output. Same program shape as agent-workload.ts, so the same drivers run it.
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";
import type { AgentProgramSpec } from "./agent-workload.js";

export interface ThunderWorkloadOptions {
  programs: number;
  /** Turns per program, drawn uniformly in [lo, hi]. */
  turns: [number, number];
  systemPromptTokens: number;
  taskTokens: number;
  outputTokens: [number, number];
  toolOutputTokens: [number, number];
  /** Tool latency is lognormal: median (ms) and σ of its log; capped at `toolMaxMs`. */
  toolMedianMs: number;
  toolSigma: number;
  toolMaxMs: number;
  /** Programs arrive uniformly over this window, ms. */
  arrivalWindowMs: number;
  /** Token ids are drawn from [minTokenId, vocabSize): keep stop tokens below minTokenId. */
  vocabSize: number;
  minTokenId: number;
  seed: number;
}

function range(field: string, r: [number, number], min: number): void {
  if (!(Number.isInteger(r[0]) && Number.isInteger(r[1]) && r[0] >= min && r[1] >= r[0])) {
    throw new ArborError(`thunder workload: ${field} must be integers [lo, hi] with ${min} <= lo <= hi, got [${r.join(", ")}]`, "config");
  }
}

/** Largest context (prompt + output) a program of this workload can reach, in tokens. */
export function maxThunderContextTokens(o: ThunderWorkloadOptions): number {
  return o.systemPromptTokens + o.taskTokens + o.turns[1] * o.outputTokens[1] + (o.turns[1] - 1) * o.toolOutputTokens[1];
}

/** Generate a deterministic workload for a seed. */
export function generateThunderWorkload(o: ThunderWorkloadOptions): AgentProgramSpec[] {
  if (!(Number.isInteger(o.programs) && o.programs >= 1)) {
    throw new ArborError(`thunder workload: programs must be an integer >= 1, got ${o.programs}`, "config");
  }
  range("turns", o.turns, 1);
  range("outputTokens", o.outputTokens, 1);
  range("toolOutputTokens", o.toolOutputTokens, 0);
  if (!(o.toolMedianMs > 0 && o.toolSigma >= 0 && o.toolMaxMs >= o.toolMedianMs)) {
    throw new ArborError(
      `thunder workload: tool latency needs toolMedianMs > 0, toolSigma >= 0, toolMaxMs >= toolMedianMs, got ${o.toolMedianMs}, ${o.toolSigma}, ${o.toolMaxMs}`,
      "config",
    );
  }
  const rng = new Rng(o.seed);
  const tokens = (n: number): number[] => Array.from({ length: n }, () => rng.int(o.minTokenId, o.vocabSize - 1));
  const system = tokens(o.systemPromptTokens);
  return Array.from({ length: o.programs }, (_, p) => {
    const arrivalMs = rng.float() * o.arrivalWindowMs;
    const promptTokenIds = [...system, ...tokens(o.taskTokens)];
    const n = rng.int(o.turns[0], o.turns[1]);
    return {
      programId: `prog-${p}`,
      arrivalMs,
      promptTokenIds,
      turns: Array.from({ length: n }, (_, t) => ({
        outputLength: rng.int(o.outputTokens[0], o.outputTokens[1]),
        toolTokens: t === n - 1 ? [] : tokens(rng.int(o.toolOutputTokens[0], o.toolOutputTokens[1])),
        toolMs: Math.round(Math.min(o.toolMaxMs, o.toolMedianMs * Math.exp(o.toolSigma * rng.normal()))),
      })),
    };
  });
}
