// Reading a SimReport back from `report.json` (what `arbor sim` wrote, or an earlier `arbor report`), checked
// against the shape of sim-report.ts so a truncated or foreign file fails with the field and the reason instead of
// drawing empty plots. Extra fields are kept: a later simulator may add some, and the renderer ignores them.
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import { SIM_REPORT_FORMAT, type SimReport } from "../../sim/scenario/sim-report.js";

const finite = z.number().finite();
const point = z.looseObject({ tMs: finite, value: finite });
const points = z.array(point);

const summary = z.looseObject({
  requests: finite,
  completed: finite,
  aborted: finite,
  programs: finite,
  makespanMs: finite,
  iterationMs: finite,
  outputTokens: finite,
  throughputTokensPerS: finite,
  stepsPerMin: finite,
  tailMs: finite,
  p50Ms: finite,
  p90Ms: finite,
  p99Ms: finite,
  preemptions: finite,
  recomputedTokens: finite,
  peakKvUsage: finite,
  meanStaleness: finite,
});

const schema = z.looseObject({
  format: z.literal(SIM_REPORT_FORMAT),
  workload: z.looseObject({
    name: z.string(),
    kind: z.enum(["rollout", "agent", "replay"]),
    description: z.string(),
    sources: z.array(z.string()),
    scale: z.record(z.string(), z.union([finite, z.string()])),
  }),
  seed: finite,
  baseline: z.string(),
  systems: z
    .array(
      z.looseObject({
        system: z.string(),
        description: z.string(),
        summary,
        series: z.looseObject({ throughput: points, kvUsage: z.record(z.string(), points), preemptions: points, recomputedTokens: points, staleness: points }),
        completionPercentilesMs: z.array(finite).length(101),
      }),
    )
    .min(1),
  ratios: z.array(z.looseObject({ system: z.string(), speedup: finite, throughput: finite, tailReduction: finite })),
});

/** Parse `report.json` text; `label` names the file in errors. Throws an {@link ArborError} naming the bad field. */
export function parseSimReport(text: string, label: string): SimReport {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ArborError(`report: ${label} is not JSON: ${(e as Error).message}`, "config");
  }
  const format = (raw as { format?: unknown } | null)?.format;
  if (format !== SIM_REPORT_FORMAT) {
    throw new ArborError(`report: ${label}: format is ${JSON.stringify(format)}, expected "${SIM_REPORT_FORMAT}" (not a report of \`arbor sim\` or \`arbor report\`, or of an incompatible version)`, "config");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : "(top level)";
    throw new ArborError(`report: ${label}: field ${where}: ${issue?.message ?? "invalid"}`, "config");
  }
  const report = parsed.data as unknown as SimReport;
  if (!report.systems.some((s) => s.system === report.baseline)) {
    throw new ArborError(`report: ${label}: baseline "${report.baseline}" is not one of the systems (${report.systems.map((s) => s.system).join(", ")})`, "config");
  }
  return report;
}
