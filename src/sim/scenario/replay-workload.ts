// `kind: replay` workloads (issue 18): a stored Arbor run's programs replayed on the simulated cluster.
// Each program's calls keep their prompt and output token counts; the gap between one call's end and
// the next call's start is its tool time; a next prompt that does not extend the previous context is
// a context reset. A sync run's iterations are replayed one after another, each starting when the one
// before it ended on the simulated cluster (its programs arriving as they did after the iteration's
// first call), so neither the run's training steps nor its own rollout times are replayed as gaps.
// The programs then run as an agent workload's do, for every agent system.
import { dirname, isAbsolute, resolve } from "node:path";
import { z } from "../../core/zod.js";
import type { Group, Trajectory } from "../../core/types.js";
import { ArborError } from "../../core/errors.js";
import { existsSync } from "node:fs";
import { runTrajectories } from "../../store/held-out-groups.js";
import { openStore } from "../../store/registry.js";
import type { AgentProgramSpec, AgentTurnSpec } from "../agent-workload.js";
import { agentScale, runAgentSystem } from "./agent-scenario.js";
import { AGENT_SYSTEMS } from "./agent-systems.js";
import { AgentClusterSchema } from "./agent-workload-spec.js";
import { checkRunOptions, scaled, type SimScenario } from "./scenario.js";

export const ReplayWorkloadSchema = z
  .object({
    kind: z.literal("replay"),
    name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "must be kebab-case"),
    description: z.string().min(1).default("a stored Arbor run replayed"),
    sources: z.array(z.string().min(1)).default([]),
    /** The run's SQLite store file (relative to the workload file) and the run id in it. */
    store: z.string().min(1),
    runId: z.string().min(1),
    cluster: AgentClusterSchema,
  })
  .strict();
export type ReplayWorkloadSpec = z.infer<typeof ReplayWorkloadSchema>;

/** Validate a `kind: replay` document; the store path is resolved against the file's folder. */
export function parseReplayWorkload(doc: unknown, file: string): ReplayWorkloadSpec {
  const r = ReplayWorkloadSchema.safeParse(doc);
  if (!r.success) {
    const issue = r.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? "(top level)" : issue.path.map(String).join(".");
    throw new ArborError(`${file}: ${where}: ${issue?.message ?? "invalid"}`, "config");
  }
  const store = isAbsolute(r.data.store) ? r.data.store : resolve(dirname(file), r.data.store);
  return { ...r.data, store };
}

const startsWith = (a: readonly number[], prefix: readonly number[]): boolean => prefix.length <= a.length && prefix.every((t, i) => a[i] === t);

/**
 * A stored run's trajectories as agent programs: one turn per call with its output length, the next prompt's new
 * tokens as tool output (or a reset), and the gap between calls as tool time. With `groups` (the run's), a program
 * of a group of the k-th iteration present (Group.iteration, ascending) is of wave k−1, arriving after its
 * iteration's first call as it did; without, or for groups that record no iteration (an async run), one wave with
 * arrivals relative to the run's first call. Programs without calls are skipped; calls with no output count as one
 * token.
 */
export function programsFromTrajectories(trajectories: readonly Trajectory[], groups: readonly Group[] = []): AgentProgramSpec[] {
  const iterationOf = new Map(groups.map((g) => [g.id, g.iteration]));
  const withCalls = trajectories
    .filter((t) => t.calls.length > 0)
    .map((t) => ({ id: t.program.id, iteration: iterationOf.get(t.program.groupId) ?? 0, calls: [...t.calls].sort((a, b) => a.index - b.index) }));
  if (withCalls.length === 0) return [];
  const iterations = [...new Set(withCalls.map((t) => t.iteration))].sort((a, b) => a - b);
  const waveOf = new Map(iterations.map((it, w) => [it, w]));
  // Each wave's first call: its programs arrive that long after the wave starts.
  const t0 = new Map<number, number>();
  for (const t of withCalls) {
    const start = (t.calls[0] as Trajectory["calls"][number]).timings.start;
    t0.set(t.iteration, Math.min(t0.get(t.iteration) ?? Infinity, start));
  }
  return withCalls
    .map(({ id, iteration, calls }) => {
      const turns: AgentTurnSpec[] = calls.map((c, i) => {
        const next = calls[i + 1];
        const outputLength = Math.max(1, c.outputTokenIds.length);
        if (next === undefined) return { outputLength, toolTokens: [], toolMs: 0 };
        const toolMs = Math.max(0, next.timings.start - c.timings.end);
        const context = [...c.promptTokenIds, ...c.outputTokenIds];
        if (startsWith(next.promptTokenIds, context)) return { outputLength, toolTokens: next.promptTokenIds.slice(context.length), toolMs };
        return { outputLength, toolTokens: [], toolMs, resetPromptTokenIds: [...next.promptTokenIds] };
      });
      const first = calls[0] as Trajectory["calls"][number];
      const wave = waveOf.get(iteration) as number;
      return { programId: id, arrivalMs: first.timings.start - (t0.get(iteration) as number), ...(wave > 0 ? { wave } : {}), promptTokenIds: [...first.promptTokenIds], turns };
    })
    .sort((a, b) => (a.wave ?? 0) - (b.wave ?? 0) || a.arrivalMs - b.arrivalMs || (a.programId < b.programId ? -1 : a.programId > b.programId ? 1 : 0));
}

/** Read the run's trajectories from the store and convert them (the store is closed again). */
export async function loadReplayPrograms(spec: Pick<ReplayWorkloadSpec, "store" | "runId">): Promise<AgentProgramSpec[]> {
  // Opening a SQLite store creates it: a mistyped path would leave an empty store there and blame the run id.
  if (!existsSync(spec.store)) throw new ArborError(`replay: store ${spec.store}: no such file`, "config");
  const store = await openStore({ kind: "sqlite", path: spec.store });
  try {
    if ((await store.getRun(spec.runId)) === undefined) throw new ArborError(`replay: run '${spec.runId}' is not in the store ${spec.store}`, "config");
    const run = await runTrajectories(store, spec.runId);
    const programs = programsFromTrajectories(run.training, run.groups);
    if (programs.length === 0) throw new ArborError(`replay: run '${spec.runId}' in ${spec.store} has no program with a call`, "config");
    return programs;
  } finally {
    await store.close();
  }
}

/** A replay workload as a scenario over the agent systems; `scale` < 1 replays the first programs (by wave, then arrival). */
export function replayScenario(spec: ReplayWorkloadSpec): SimScenario {
  let loaded: Promise<AgentProgramSpec[]> | undefined;
  /** The run's programs, read from the store once (for the scale and for every system's run). */
  const programs = (): Promise<AgentProgramSpec[]> => (loaded ??= loadReplayPrograms(spec));
  return {
    info: {
      name: spec.name,
      kind: "replay",
      description: spec.description,
      sources: [`Arbor run ${spec.runId} in ${spec.store}: prompt/output token counts and tool gaps of every call`, ...spec.sources],
      // The programs are counted when the store is read (scaleAt); 0 here, before.
      scale: { ...agentScale(spec.cluster, 0, 1), runId: spec.runId },
    },
    systems: AGENT_SYSTEMS.map((s) => s.name),
    async scaleAt(scale) {
      // Programs as run replays them.
      const all = await programs();
      return { ...agentScale(spec.cluster, scaled(all.length, scale), scale), runId: spec.runId };
    },
    async run(system, o) {
      checkRunOptions(o);
      const all = await programs();
      return runAgentSystem(system, spec.cluster, all.slice(0, scaled(all.length, o.scale)), o);
    },
  };
}

/** Parse a `kind: replay` document and build its scenario (for the loader's dispatch on `kind`). */
export function replayScenarioFromDoc(doc: unknown, file: string): SimScenario {
  return replayScenario(parseReplayWorkload(doc, file));
}
