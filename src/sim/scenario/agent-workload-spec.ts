// The `kind: agent` workload file of `arbor sim` (issue 18): a cluster and a population of multi-turn
// agent programs (turns, context growth, heavy-tailed tool latency, sandbox start, context resets),
// each figure with its source. Parsed with zod; every error names the file and the field.
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";

const intRange = (min: number) =>
  z
    .tuple([z.int().min(min), z.int().min(min)])
    .refine(([lo, hi]) => lo <= hi, { message: "must be [lo, hi] with lo <= hi" });

/** A lognormal latency: median and σ of its log, capped at maxMs. */
export const LognormalMsSchema = z
  .object({
    medianMs: z.number().positive(),
    sigma: z.number().min(0),
    maxMs: z.number().positive(),
  })
  .strict()
  .refine((l) => l.maxMs >= l.medianMs, { message: "maxMs must be >= medianMs" });
export type LognormalMs = z.infer<typeof LognormalMsSchema>;

/** The simulated cluster: engines of one cost profile behind the gateway. */
export const AgentClusterSchema = z
  .object({
    /** Engines at full scale (scale 1); each spans the profile's GPUs. */
    engines: z.int().min(1),
    /** Cost profile name (src/engine/costmodel/profile.ts). */
    profile: z.string().min(1).default("llama-3-8b/h100"),
    /** L1 KV tokens per engine; default the profile's HBM capacity. */
    kvTokensPerEngine: z.int().positive().optional(),
    /** Host-memory (L2) KV tokens per engine for systems that use the tier; default 4 × L1. */
    l2TokensPerEngine: z.int().positive().optional(),
    /** vLLM max_num_seqs. */
    maxNumSeqs: z.int().min(1).default(256),
  })
  .strict();

/** The programs: all start in one rollout batch (over arrivalWindowMs), each runs its turns to the end. */
export const AgentProgramsSchema = z
  .object({
    /** Programs at full scale. */
    count: z.int().min(1),
    arrivalWindowMs: z.number().min(0).default(0),
    /** Model calls per program, uniform in [lo, hi]. */
    turns: intRange(1),
    /** Shared by every program (prefix-cache hits across programs). */
    systemPromptTokens: z.int().min(0),
    /** The program's own task (issue text, question), uniform in [lo, hi]. */
    taskTokens: intRange(0),
    /** Tokens the model generates per call, uniform in [lo, hi]. */
    outputTokens: intRange(1),
    /** Tokens a tool returns into the context after a call, uniform in [lo, hi]. */
    toolOutputTokens: intRange(0),
    /** Tool execution time between calls. */
    toolLatency: LognormalMsSchema,
    /** Sandbox start before the first call (none when absent). */
    sandboxStart: LognormalMsSchema.optional(),
    /** Context resets: every `everyTurns` calls the context restarts from the system prompt + a summary. */
    contextReset: z
      .object({ everyTurns: z.int().min(1), summaryTokens: intRange(1) })
      .strict()
      .optional(),
  })
  .strict();

export const AgentWorkloadSchema = z
  .object({
    kind: z.literal("agent"),
    name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "must be kebab-case"),
    description: z.string().min(1),
    /** Where each figure comes from, one entry per figure or group of figures. */
    sources: z.array(z.string().min(1)).min(1),
    cluster: AgentClusterSchema,
    programs: AgentProgramsSchema,
  })
  .strict();

export type AgentWorkloadSpec = z.infer<typeof AgentWorkloadSchema>;
export type AgentProgramsSpec = z.infer<typeof AgentProgramsSchema>;

/**
 * Validate a parsed YAML document as an agent workload. `file` names the source in errors, which
 * say which field is wrong and why (`thunder-swe.yaml: programs.turns: must be [lo, hi] with lo <= hi`).
 */
export function parseAgentWorkload(doc: unknown, file: string): AgentWorkloadSpec {
  const r = AgentWorkloadSchema.safeParse(doc);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const where = issue === undefined || issue.path.length === 0 ? "(top level)" : issue.path.map(String).join(".");
  throw new ArborError(`${file}: ${where}: ${issue?.message ?? "invalid"}`, "config");
}
