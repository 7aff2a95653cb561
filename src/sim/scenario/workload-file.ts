// Workload files (src/sim/workloads/*.yaml): the common fields every kind has (name, kind, description,
// sources), checked with zod, then the kind's own fields handed to its parser: `rollout` (Seer-like groups on the
// rollout simulation), `agent` (multi-turn programs on the gateway simulation), `replay` (a stored run's programs).
// A modelled workload must say what it models and where its figures come from; a replay's figures are the stored
// run's (its store and run are its source), so there the two are optional.
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { z } from "../../core/zod.js";
import { ArborError } from "../../core/errors.js";
import { agentScenarioFromDoc } from "./agent-scenario.js";
import { replayScenarioFromDoc } from "./replay-workload.js";
import { createRolloutScenario, rolloutWorkloadSchema } from "./rollout-workload.js";
import type { SimScenario } from "./scenario.js";
import type { SimWorkloadInfo } from "./sim-report.js";

/** The fields every workload file has (description and sources optional for a replay only). */
export const workloadHeaderSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "a lowercase kebab-case name"),
    kind: z.enum(["rollout", "agent", "replay"]),
    description: z.string().min(1).optional(),
    sources: z.array(z.string().min(1)).min(1).optional(),
  })
  .superRefine((h, ctx) => {
    if (h.kind === "replay") return;
    if (h.description === undefined) ctx.addIssue({ code: "custom", path: ["description"], message: "required: a sentence saying what the workload models" });
    if (h.sources === undefined) ctx.addIssue({ code: "custom", path: ["sources"], message: "required: a list naming where the workload's figures come from (a paper's table, a measurement)" });
  });

/** A checked header: name, and description and sources (present unless the kind is `replay`). */
type WorkloadHeader = Omit<z.infer<typeof workloadHeaderSchema>, "kind">;

/** What a kind's parser gets: the header, and the file's other fields (unchecked). */
export type WorkloadParser = (header: WorkloadHeader, rest: Record<string, unknown>, file: string) => SimScenario;

/** A modelled workload's header, whose description and sources the schema required. */
function described(h: WorkloadHeader): Omit<SimWorkloadInfo, "scale" | "kind"> {
  return { name: h.name, description: h.description as string, sources: h.sources as string[] };
}

/** Parsers by kind. The agent and replay parsers check the whole document (their schemas are strict). */
export const WORKLOAD_PARSERS: Record<SimWorkloadInfo["kind"], WorkloadParser> = {
  rollout: (header, rest, file) => createRolloutScenario(described(header), checked(rolloutWorkloadSchema, rest, file)),
  agent: (header, rest, file) => agentScenarioFromDoc({ ...described(header), kind: "agent", ...rest }, file),
  // Absent description and sources take the replay schema's defaults.
  replay: (header, rest, file) => replayScenarioFromDoc({ ...header, kind: "replay", ...rest }, file),
};

function checked<T>(schema: z.ZodType<T>, value: unknown, file: string): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const first = r.error.issues[0];
    const where = first === undefined || first.path.length === 0 ? "(top level)" : first.path.join(".");
    throw new ArborError(`workload file ${file}: ${where}: ${first?.message ?? "invalid"}`, "config");
  }
  return r.data;
}

/** Parse a workload file's text (`file` names it in errors). */
export function parseWorkload(text: string, file: string): SimScenario {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ArborError(`workload file ${file}: not valid YAML: ${(err as Error).message}`, "config");
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new ArborError(`workload file ${file}: must be a YAML mapping`, "config");
  const { name, kind, description, sources, ...rest } = doc as Record<string, unknown>;
  const header = checked(workloadHeaderSchema, { name, kind, description, sources }, file);
  const { kind: k, ...fields } = header;
  return WORKLOAD_PARSERS[k](fields, rest, file);
}

/** Read and parse a workload file. */
export async function loadWorkloadFile(path: string): Promise<SimScenario> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ArborError(`workload file ${path}: ${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "a folder, not a file" : (e as Error).message}`, "config");
  }
  return parseWorkload(text, path);
}
