// `kind: replay` workloads (issue 18): a stored Arbor run's programs replayed on the simulated cluster.
// Each program's calls keep their prompt and output token counts; the gap between one call's end and
// the next call's start is its tool time; a next prompt that does not extend the previous context is
// a context reset. The programs then run as an agent workload's do, for every agent system.
import { dirname, isAbsolute, resolve } from "node:path";
import { z } from "../../core/zod.js";
import type { Trajectory } from "../../core/types.js";
import { ArborError } from "../../core/errors.js";
import { trainingTrajectories } from "../../store/held-out-groups.js";
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
 * A stored run's trajectories as agent programs: arrivals relative to the run's first call, one turn
 * per call with its output length, the next prompt's new tokens as tool output (or a reset), and the
 * gap between calls as tool time. Programs without calls are skipped; calls with no output count as one token.
 */
export function programsFromTrajectories(trajectories: readonly Trajectory[]): AgentProgramSpec[] {
  const withCalls = trajectories.filter((t) => t.calls.length > 0).map((t) => ({ id: t.program.id, calls: [...t.calls].sort((a, b) => a.index - b.index) }));
  if (withCalls.length === 0) return [];
  const t0 = Math.min(...withCalls.map((t) => (t.calls[0] as Trajectory["calls"][number]).timings.start));
  return withCalls
    .map(({ id, calls }) => {
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
      return { programId: id, arrivalMs: first.timings.start - t0, promptTokenIds: [...first.promptTokenIds], turns };
    })
    .sort((a, b) => a.arrivalMs - b.arrivalMs || (a.programId < b.programId ? -1 : a.programId > b.programId ? 1 : 0));
}

/** Read the run's trajectories from the store and convert them (the store is closed again). */
export async function loadReplayPrograms(spec: Pick<ReplayWorkloadSpec, "store" | "runId">): Promise<AgentProgramSpec[]> {
  const store = await openStore({ kind: "sqlite", path: spec.store });
  try {
    if ((await store.getRun(spec.runId)) === undefined) throw new ArborError(`replay: run '${spec.runId}' is not in the store ${spec.store}`, "config");
    const programs = programsFromTrajectories(await trainingTrajectories(store, spec.runId));
    if (programs.length === 0) throw new ArborError(`replay: run '${spec.runId}' in ${spec.store} has no program with a call`, "config");
    return programs;
  } finally {
    await store.close();
  }
}

/** A replay workload as a scenario over the agent systems; `scale` < 1 replays the first programs by arrival. */
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
