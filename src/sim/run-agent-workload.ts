// Drives an agent workload through one simulated engine: each program's next turn is submitted when
// its previous turn has finished and its tool has run (a timer on the virtual clock), with the
// exact output tokens of the previous turn in its prompt.
import type { VirtualClock } from "../core/clock.js";
import type { CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import type { FinishedRequest, NewRequest } from "../engine/scheduler/scheduler.js";
import { runUntilIdle, type SimEngine } from "../engine/sim-engine.js";
import type { AgentProgramSpec } from "./agent-workload.js";

export interface AgentWorkloadResult {
  /** Clock time when the last program finished, ms. */
  makespanMs: number;
  requests: number;
  promptTokens: number;
  outputTokens: number;
  /** Prompt tokens served from the prefix cache at first scheduling. */
  cachedPromptTokens: number;
  preemptions: number;
  /** Per program: finish time − arrival, ms. */
  programLatencyMs: Map<string, number>;
}

/**
 * Run every program to its last turn. `engine` must have been built with `executor` and `clock`, and
 * its `onFinished` routed to the returned handler — see {@link agentWorkloadDriver}.
 */
export function agentWorkloadDriver(programs: AgentProgramSpec[], executor: CostModelExecutor, clock: VirtualClock) {
  const byId = new Map(programs.map((p) => [p.programId, p]));
  const state = new Map<string, { turn: number; prompt: NewRequest["promptTokenIds"] }>();
  const result: AgentWorkloadResult = {
    makespanMs: 0,
    requests: 0,
    promptTokens: 0,
    outputTokens: 0,
    cachedPromptTokens: 0,
    preemptions: 0,
    programLatencyMs: new Map(),
  };
  let engine: SimEngine | undefined;

  const submit = (p: AgentProgramSpec): void => {
    const s = state.get(p.programId)!;
    const spec = p.turns[s.turn]!;
    const requestId = `${p.programId}/t${s.turn}`;
    executor.setOutputLength(requestId, spec.outputLength);
    engine!.submit({ requestId, promptTokenIds: s.prompt, maxTokens: spec.outputLength, programId: p.programId });
    result.requests++;
    result.promptTokens += s.prompt.length;
  };

  return {
    /** Route the engine's finished requests here. */
    onFinished(f: FinishedRequest): void {
      const p = byId.get(f.programId ?? "");
      if (!p) throw new Error(`finished request ${f.requestId} belongs to no program of the workload`);
      const s = state.get(p.programId)!;
      result.outputTokens += f.outputTokenIds.length;
      result.cachedPromptTokens += f.numCachedTokens;
      result.preemptions += f.numPreemptions;
      const spec = p.turns[s.turn]!;
      if (f.finishReason !== "stop" || f.outputTokenIds.length !== spec.outputLength) {
        throw new Error(`request ${f.requestId} ended with ${f.finishReason} after ${f.outputTokenIds.length} tokens, expected stop after ${spec.outputLength}`);
      }
      if (s.turn === p.turns.length - 1) {
        result.programLatencyMs.set(p.programId, clock.now() - p.arrivalMs);
        result.makespanMs = Math.max(result.makespanMs, clock.now());
        return;
      }
      // The finished request's whole sequence (prompt ‖ output) and the tool's reply: one copy, no spread.
      const next = new Uint32Array(f.tokenIds.length + spec.toolTokens.length);
      next.set(f.tokenIds);
      next.set(spec.toolTokens, f.tokenIds.length);
      s.prompt = next;
      s.turn++;
      clock.setTimer(spec.toolMs, () => submit(p));
    },
    /** Schedule every program's arrival, run the engine until idle, and return the totals. */
    run(e: SimEngine): AgentWorkloadResult {
      engine = e;
      for (const p of programs) {
        state.set(p.programId, { turn: 0, prompt: p.promptTokenIds });
        clock.setTimer(p.arrivalMs, () => submit(p));
      }
      runUntilIdle(clock, [e]);
      if (result.programLatencyMs.size !== programs.length) {
        throw new Error(`${programs.length - result.programLatencyMs.size} program(s) did not finish`);
      }
      return result;
    },
  };
}
