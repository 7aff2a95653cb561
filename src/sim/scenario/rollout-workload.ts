// The `rollout` kind of workload file: synchronous RL iterations of groups of samples with heavy-tailed
// output lengths (Seer's Table 3 workloads), on a cluster of cost-model engines, under the systems of
// rollout-systems.ts. Parses the kind's fields and builds the SimScenario that runs them.
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import { getCostProfile } from "../../engine/costmodel/profile.js";
import { runRolloutSim } from "../rollout-sim.js";
import { generateSeerWorkload } from "../seer-workload.js";
import { checkRunOptions, scaled, type SimScenario } from "./scenario.js";
import { rolloutSystems } from "./rollout-systems.js";
import type { SimWorkloadInfo } from "./sim-report.js";
import { rolloutSystemResult } from "./system-result.js";

const positiveInt = z.number().int().positive();

/** The fields of a `kind: rollout` workload file beside the common ones (name, kind, description, sources). */
export const rolloutWorkloadSchema = z
  .object({
    cluster: z
      .object({
        /** GPUs of the whole rollout cluster, and per engine instance (its cost profile spans that many). */
        gpus: positiveInt,
        gpusPerInstance: positiveInt,
        /** Cost profile name (engine/costmodel/profile.ts). */
        profile: z.string().min(1),
        maxNumSeqs: positiveInt,
        maxNumBatchedTokens: positiveInt.default(8192),
        /** KV tokens per instance (default: the profile's HBM capacity). */
        kvTokensPerInstance: positiveInt.optional(),
      })
      .strict(),
    workload: z
      .object({
        /** Prompts (groups) per iteration, samples per prompt. */
        prompts: positiveInt,
        groupSize: positiveInt,
        maxTokens: positiveInt,
        meanTokens: z.number().positive(),
        promptTokens: z.tuple([positiveInt, positiveInt]),
        /** Log-normal spread of lengths between groups and within a group. */
        groupSigma: z.number().nonnegative(),
        sampleSigma: z.number().nonnegative(),
        iterations: positiveInt.default(1),
      })
      .strict(),
    divided: z.object({ chunkTokens: positiveInt, arborChunkTokens: positiveInt.optional() }).strict(),
    /** Period of the report's time series, simulated ms. */
    sampleMs: z.number().positive().default(10_000),
  })
  .strict();

export type RolloutWorkloadSpec = z.infer<typeof rolloutWorkloadSchema>;

/** Build the scenario of a parsed rollout workload. */
export function createRolloutScenario(base: Omit<SimWorkloadInfo, "scale" | "kind">, spec: RolloutWorkloadSpec): SimScenario {
  const { cluster, workload: w } = spec;
  const profile = getCostProfile(cluster.profile);
  if (profile.tensorParallel !== cluster.gpusPerInstance) {
    throw new ArborError(`workload ${base.name}: cluster.gpusPerInstance is ${cluster.gpusPerInstance} but profile ${profile.name} spans ${profile.tensorParallel} GPUs`, "config");
  }
  if (cluster.gpus % cluster.gpusPerInstance !== 0) {
    throw new ArborError(`workload ${base.name}: cluster.gpus (${cluster.gpus}) is not a multiple of gpusPerInstance (${cluster.gpusPerInstance})`, "config");
  }
  if (!(w.meanTokens < w.maxTokens)) throw new ArborError(`workload ${base.name}: workload.meanTokens must be below maxTokens`, "config");
  if (w.promptTokens[0] > w.promptTokens[1]) throw new ArborError(`workload ${base.name}: workload.promptTokens must be [min, max] with min <= max`, "config");
  const instances = cluster.gpus / cluster.gpusPerInstance;
  const kvTokens = cluster.kvTokensPerInstance ?? profile.hbmKvCapacityTokens;
  const systems = rolloutSystems(spec.divided);
  /** The groups per iteration and engines of a run at `scale`. */
  const sized = (scale: number): { groupsPerIteration: number; engines: number } => ({ groupsPerIteration: scaled(w.prompts, scale), engines: scaled(instances, scale) });
  const scaleAt = (scale: number): Record<string, number | string> => {
    const { groupsPerIteration, engines } = sized(scale);
    return {
      gpus: engines * cluster.gpusPerInstance,
      instances: engines,
      gpusPerInstance: cluster.gpusPerInstance,
      profile: profile.name,
      kvTokensPerInstance: kvTokens,
      maxNumSeqs: cluster.maxNumSeqs,
      promptsPerIteration: groupsPerIteration,
      groupSize: w.groupSize,
      requestsPerIteration: groupsPerIteration * w.groupSize,
      iterations: w.iterations,
      maxOutputTokens: w.maxTokens,
      meanOutputTokens: w.meanTokens,
      chunkTokens: spec.divided.chunkTokens,
    };
  };
  const info: SimWorkloadInfo = { ...base, kind: "rollout", scale: scaleAt(1) };
  return {
    info,
    systems: systems.map((s) => s.name),
    scaleAt: async (scale) => scaleAt(scale),
    async run(system, o) {
      const sys = systems.find((s) => s.name === system);
      if (sys === undefined) throw new ArborError(`workload ${base.name}: unknown system '${system}' (known: ${systems.map((s) => s.name).join(", ")})`, "config");
      checkRunOptions(o);
      const { groupsPerIteration, engines } = sized(o.scale);
      const tasks = generateSeerWorkload({
        groups: groupsPerIteration * w.iterations,
        groupSize: w.groupSize,
        maxTokens: w.maxTokens,
        meanRatio: w.meanTokens / w.maxTokens,
        promptTokens: w.promptTokens,
        groupSigma: w.groupSigma,
        sampleSigma: w.sampleSigma,
        vocabSize: 128_256,
        minTokenId: 3,
        seed: o.seed,
      });
      const result = runRolloutSim({
        tasks,
        groupSize: w.groupSize,
        policy: sys.policy,
        chunkTokens: sys.chunkTokens,
        starvationMs: sys.options?.starvationMs,
        kvAffinity: sys.options?.kvAffinity,
        speculation: sys.speculation,
        mode: "sync",
        batchGroups: groupsPerIteration,
        maxBatches: w.iterations,
        engines,
        kvTokensPerEngine: kvTokens,
        maxNumSeqs: cluster.maxNumSeqs,
        maxNumBatchedTokens: cluster.maxNumBatchedTokens,
        profile: profile.name,
        trainStepMs: 0,
        weightSyncMs: 0,
        sampleMs: spec.sampleMs,
        seed: o.seed,
        ...(o.onAdvance === undefined ? {} : { onRequestFinished: (n: number) => o.onAdvance?.(n, tasks.length * w.groupSize) }),
      });
      return rolloutSystemResult({ system: sys.name, description: sys.description, requests: tasks.length * w.groupSize, groups: tasks.length, result });
    },
  };
}
