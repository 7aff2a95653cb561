// The programs of an agent workload file, drawn from a seed: each program shares the system prompt,
// has its own task, and alternates calls with tool runs whose outputs grow its context (or, with
// context resets, restarts it from the system prompt + a summary every few calls). Sandbox start
// delays a program's first call; tool latency is lognormal with a cap.
import { Rng } from "../../core/rng.js";
import type { AgentProgramSpec } from "../agent-workload.js";
import type { AgentProgramsSpec, LognormalMs } from "./agent-workload-spec.js";

/** Token ids drawn from [MIN_TOKEN_ID, VOCAB): ids below it are kept for stop tokens. */
const MIN_TOKEN_ID = 3;
const VOCAB = 128_256;

/** One draw of a capped lognormal latency, whole ms. */
export function drawLognormalMs(rng: Rng, l: LognormalMs): number {
  return Math.round(Math.min(l.maxMs, l.medianMs * Math.exp(l.sigma * rng.normal())));
}

/**
 * Draw `count` programs (the workload's own count times the scale, chosen by the caller) for a seed.
 * Deterministic: the same spec, count and seed give the same programs.
 */
export function generateAgentPrograms(p: AgentProgramsSpec, count: number, seed: number): AgentProgramSpec[] {
  const rng = new Rng(seed);
  const tokens = (n: number): number[] => Array.from({ length: n }, () => rng.int(MIN_TOKEN_ID, VOCAB - 1));
  const pick = (r: readonly [number, number]): number => rng.int(r[0], r[1]);
  const system = tokens(p.systemPromptTokens);
  return Array.from({ length: count }, (_, i) => {
    const sandboxMs = p.sandboxStart === undefined ? 0 : drawLognormalMs(rng, p.sandboxStart);
    const arrivalMs = Math.round(rng.float() * p.arrivalWindowMs) + sandboxMs;
    const n = pick(p.turns);
    const turns = Array.from({ length: n }, (_, t) => {
      const last = t === n - 1;
      const reset = !last && p.contextReset !== undefined && (t + 1) % p.contextReset.everyTurns === 0;
      return {
        outputLength: pick(p.outputTokens),
        toolTokens: last ? [] : tokens(pick(p.toolOutputTokens)),
        toolMs: last ? 0 : drawLognormalMs(rng, p.toolLatency),
        ...(reset && p.contextReset ? { resetPromptTokenIds: [...system, ...tokens(pick(p.contextReset.summaryTokens))] } : {}),
      };
    });
    return { programId: `prog-${i}`, arrivalMs, promptTokenIds: [...system, ...tokens(pick(p.taskTokens))], turns };
  });
}
