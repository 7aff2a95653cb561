// Stores written before held-out programs joined their run's own id (Group.heldOutVersion, loop/held-out-programs.ts)
// hold them in a store run of their own, `<run>-eval`, marked in its stored config, so that whatever builds batches
// from a store (`arbor export`, batch/export-store.ts) leaves it out: held-out programs are never trained on,
// offline either. Kept to read those stores.
const KEY = "heldOutEvaluationOf";

/** The stored config of the held-out run of `runId`: the run's config with the mark added. */
export function heldOutRunConfigJson(configJson: string, runId: string): string {
  let cfg: unknown;
  try {
    cfg = JSON.parse(configJson);
  } catch {
    cfg = {};
  }
  return JSON.stringify({ ...(typeof cfg === "object" && cfg !== null ? cfg : {}), [KEY]: runId });
}

/** The run whose held-out evaluation a stored config belongs to, or undefined for any other run's config. */
export function heldOutRunOf(configJson: string): string | undefined {
  try {
    const v = (JSON.parse(configJson) as Record<string, unknown> | null)?.[KEY];
    return typeof v === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}
