// Finding a Python interpreter for tests that run Python (the arbor_client package in python/): the one named by
// ARBOR_PYTHON, else the first of /usr/bin/python3 and python3 that imports the modules a test needs. Machines
// differ (Debian's numpy 1.x beside a pyenv numpy 2.x; torch or pyarrow in only one), so a test asks for what
// it imports and is skipped, saying why, where no interpreter has it.
import { spawnSync } from "node:child_process";

/** Interpreters tried after ARBOR_PYTHON, in order. */
export const PYTHON_CANDIDATES = ["/usr/bin/python3", "python3"] as const;

/** Bound on one import probe: a cold `import torch` takes seconds, a hung interpreter must not hang the test run. */
const PROBE_TIMEOUT_MS = 60_000;

const probes = new Map<string, boolean>();

/** Whether `python` starts and imports every module of `modules` (cached per interpreter and module list). */
export function pythonHas(python: string, modules: readonly string[]): boolean {
  const key = `${python}\0${modules.join(",")}`;
  let ok = probes.get(key);
  if (ok === undefined) {
    const code = modules.length > 0 ? `import ${modules.join(", ")}` : "pass";
    const r = spawnSync(python, ["-c", code], { stdio: "ignore", timeout: PROBE_TIMEOUT_MS });
    ok = r.status === 0;
    probes.set(key, ok);
  }
  return ok;
}

/**
 * The interpreter to run Python with: `ARBOR_PYTHON` when set (only if it imports `modules`: a wrong setting
 * is not silently replaced), else the first of {@link PYTHON_CANDIDATES} that imports every one of `modules`;
 * undefined when none does.
 */
export function findPython(modules: string[]): string | undefined {
  const forced = process.env.ARBOR_PYTHON;
  if (forced) return pythonHas(forced, modules) ? forced : undefined;
  return PYTHON_CANDIDATES.find((p) => pythonHas(p, modules));
}

/** Why {@link findPython} found nothing for `modules`, for a skipped test's name. */
export function noPythonReason(modules: string[]): string {
  const tried = process.env.ARBOR_PYTHON ? `ARBOR_PYTHON=${process.env.ARBOR_PYTHON}` : PYTHON_CANDIDATES.join(", ");
  return `no Python interpreter imports ${modules.join(", ") || "nothing"} (tried ${tried}; set ARBOR_PYTHON)`;
}
