// The workloads `arbor sim` knows by name: the YAML files shipped in src/sim/workloads/ (copied beside the
// compiled modules by the build), or a path to a workload file of one's own.
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ArborError } from "../../core/errors.js";
import type { SimScenario } from "./scenario.js";
import { loadWorkloadFile } from "./workload-file.js";

/** The shipped workload files' folder. */
export const WORKLOADS_DIR = fileURLToPath(new URL("../workloads/", import.meta.url));

/** Names of the shipped workloads (their files' names without .yaml), sorted. */
export const scenarioNames: readonly string[] = readdirSync(WORKLOADS_DIR)
  .filter((f) => f.endsWith(".yaml"))
  .map((f) => f.slice(0, -".yaml".length))
  .sort();

/** A shipped workload by name, or a workload file by path (anything ending in .yaml or .yml). */
export async function getScenario(name: string): Promise<SimScenario> {
  if (/\.ya?ml$/.test(name)) return loadWorkloadFile(name);
  if (!scenarioNames.includes(name)) throw new ArborError(`unknown sim workload '${name}' (known: ${scenarioNames.join(", ")}; or a path to a .yaml workload file)`, "config");
  const s = await loadWorkloadFile(`${WORKLOADS_DIR}${name}.yaml`);
  if (s.info.name !== name) throw new ArborError(`workload file ${name}.yaml names itself '${s.info.name}'`, "config");
  return s;
}
