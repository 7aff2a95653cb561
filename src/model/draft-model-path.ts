// Where a policy version's draft model lives: `draft-v{N}.gguf` beside `policy-v{N}.gguf`, so whatever
// serves a checkpoint finds the draft distilled from it, and the draft's version is the policy's.
import { basename, dirname, join } from "node:path";
import { ArborError } from "../core/errors.js";

/** `draft-v{N}.gguf`. */
export function draftFileName(version: number): string {
  if (!Number.isInteger(version) || version < 0) throw new ArborError(`draft model: version must be an integer >= 0, got ${version}`, "config");
  return `draft-v${version}.gguf`;
}

/**
 * The draft's path for the policy checkpoint at `policyPath` (`…/policy-vN.gguf` → `…/draft-vN.gguf`).
 * Throws ArborError when the file name is not a versioned policy checkpoint.
 */
export function draftModelPath(policyPath: string): string {
  const m = /^policy-v(\d+)\.gguf$/.exec(basename(policyPath));
  if (!m) throw new ArborError(`draft model: ${policyPath} is not a versioned policy checkpoint (policy-v<N>.gguf)`, "config");
  return join(dirname(policyPath), draftFileName(Number(m[1])));
}
