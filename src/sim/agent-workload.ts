// A synthetic multi-turn agent workload (SWE-agent-like): every program shares a system prompt,
// has its own task, and alternates model turns with tool calls whose output grows the context.
// Each turn's prompt is the previous prompt + the model's output + the tool's output, which is
// what makes prefix caching (and its absence: recompute) matter.
import { Rng } from "../core/rng.js";

export interface AgentTurnSpec {
  /** Tokens the model generates this turn (the cost model stops the request exactly there). */
  outputLength: number;
  /** Tokens the tool returns after this turn (empty after the last turn). */
  toolTokens: number[];
  /** How long the tool runs before the next turn is submitted, ms. */
  toolMs: number;
  /**
   * A context reset after this turn (a search agent's summary): the next turn's prompt is exactly
   * these tokens (system prompt + summary) instead of prompt + output + tool output.
   */
  resetPromptTokenIds?: number[];
}

export interface AgentProgramSpec {
  programId: string;
  /** When the program's first turn arrives, ms after its wave started. */
  arrivalMs: number;
  /**
   * Programs run in waves, one after another (a sync RL run's iterations): wave 0 starts at time 0, and each later
   * wave when the last program of the wave before it ended. Absent: 0.
   */
  wave?: number;
  /** Shared system prompt followed by the program's task. */
  promptTokenIds: number[];
  turns: AgentTurnSpec[];
}

export interface AgentWorkloadOptions {
  programs: number;
  turns: number;
  systemPromptTokens: number;
  taskTokens: number;
  outputTokens: [number, number];
  toolOutputTokens: [number, number];
  toolMs: [number, number];
  /** Programs arrive uniformly over this window, ms. */
  arrivalWindowMs: number;
  /** Token ids are drawn from [minTokenId, vocabSize): keep stop tokens below minTokenId. */
  vocabSize: number;
  minTokenId: number;
  seed: number;
}

/** Generate a deterministic workload for a seed. */
export function generateAgentWorkload(o: AgentWorkloadOptions): AgentProgramSpec[] {
  const rng = new Rng(o.seed);
  const tokens = (n: number): number[] => Array.from({ length: n }, () => rng.int(o.minTokenId, o.vocabSize - 1));
  const system = tokens(o.systemPromptTokens);
  return Array.from({ length: o.programs }, (_, p) => ({
    programId: `prog-${p}`,
    arrivalMs: rng.float() * o.arrivalWindowMs,
    promptTokenIds: [...system, ...tokens(o.taskTokens)],
    turns: Array.from({ length: o.turns }, (_, t) => ({
      outputLength: rng.int(o.outputTokens[0], o.outputTokens[1]),
      toolTokens: t === o.turns - 1 ? [] : tokens(rng.int(o.toolOutputTokens[0], o.toolOutputTokens[1])),
      toolMs: rng.int(o.toolMs[0], o.toolMs[1]),
    })),
  }));
}
