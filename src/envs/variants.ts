// Diversity and perturbation (ROLL, Forge): an environment declares variants (versions, environment
// variables, configuration) and perturbations (a dependency removed, a mirror that never answers);
// each program is sampled into one by seed, so the same seed and program give the same choice.
import { ArborError } from "../core/errors.js";
import { Rng } from "../core/rng.js";

export interface EnvVariant {
  id: string;
  kind: "variant" | "perturbation";
  description: string;
  /** Environment variables every tool command of the program sees. */
  env?: Record<string, string>;
  /** Files written into the workspace at set-up (workspace-relative path → content). */
  files?: Record<string, string>;
  /** Workspace-relative paths removed at set-up (e.g. a pre-installed dependency). */
  remove?: string[];
  /** Relative sampling weight (default 1). */
  weight?: number;
}

/** The variant of `programId` under `seed` (undefined when the environment declares none). */
export function sampleVariant(variants: readonly EnvVariant[], seed: number, programId: string): EnvVariant | undefined {
  if (variants.length === 0) return undefined;
  const weights = variants.map((v) => {
    const w = v.weight ?? 1;
    if (!(Number.isFinite(w) && w >= 0)) throw new ArborError(`variant '${v.id}': weight must be a finite number >= 0, got ${w}`, "config");
    return w;
  });
  return variants[new Rng(seed).fork(`variant:${programId}`).categorical(weights)];
}
