// Batches for the Python client's tests (python/tests, src/batch/python-client.test.ts): real batches from the
// batch builder over hand-made multi-turn programs (shared prompts, siblings forking inside their first answer,
// tool output masked between model turns), written in both wire formats beside a JSON of what every sample
// must read back as. `npx tsx scripts/python-fixtures.ts <dir>` writes them for a standalone Python run.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildTrainingBatch } from "../batch/build-batch.js";
import { batchToArrow, sampleMeta, type ExportedBatch, type SampleMeta } from "../batch/export-arrow.js";
import { batchToSafetensors } from "../batch/export-safetensors.js";
import { buildTreeBatch } from "../batch/tree/tree-batch.js";
import type { SampleMode } from "../batch/trajectory-samples.js";
import { specTrajectories } from "./test-batches.js";

/** What one sample must read back as in Python; floats as the tree stores them (float32). */
export interface ExpectedSample extends SampleMeta {
  tokens: number[];
  lossMask: number[];
  advantage: number[];
  oldLogprob: number[];
  weight: number[];
  /** Ratio unit of the term whose target is the token; −1 where there is none. */
  unit: number[];
}

/** The fixtures written by {@link writePythonFixtures}: name → estimator and sample mode. */
export const PYTHON_FIXTURES: Record<string, { estimator: string; mode: SampleMode }> = {
  grpo: { estimator: "grpo", mode: "merged" },
  "chunked-mdp": { estimator: "chunked-mdp", mode: "merged" },
  "gspo-per-call": { estimator: "gspo", mode: "per-call" },
};

/**
 * A batch of two groups: in each, programs of one to three calls whose contexts grow as prompt ‖ answer ‖ tool
 * output, siblings forking from an earlier one at different depths (shared prefixes in the tree), rewards
 * that differ within each group (non-zero advantages).
 */
export function pythonFixtureBatch(id: string, estimator: string, mode: SampleMode): ExportedBatch {
  const call = (output: number[], tool: number[]) => ({ output, tool, logprobs: output.map((t, i) => -0.25 - ((t * 7 + i) % 13) / 8) });
  const spec = {
    prompts: [
      [11, 12, 13],
      [11, 14],
    ],
    groups: [
      [
        { forkFrom: 0, forkDepth: 0, calls: [call([20, 21, 22], [90, 91]), call([23, 24], [92]), call([25], [93])], reward: 1 },
        { forkFrom: 0, forkDepth: 2, calls: [call([30, 31], [90]), call([32], [94])], reward: 0 },
        { forkFrom: 1, forkDepth: 1, calls: [call([40, 41, 42, 43], [95])], reward: 0.5 },
      ],
      [
        { forkFrom: 0, forkDepth: 0, calls: [call([50, 51], [96, 97, 98]), call([52, 53, 54], [99])], reward: 0 },
        { forkFrom: 0, forkDepth: 1, calls: [call([60], [96]), call([61, 62], [99])], reward: 1 },
      ],
    ],
    estimator,
    mode,
  };
  return buildTrainingBatch({ id, ...specTrajectories(spec), estimator, mode }).batch;
}

/** Every sample of `batch` as Python must reconstruct it (token ids, mask, float32 loss inputs, ratio units). */
export function expectedSamples(batch: ExportedBatch): ExpectedSample[] {
  const tb = buildTreeBatch(batch.samples, batch.loss);
  const units = batch.samples.map((s) => s.tokenIds.map(() => -1));
  tb.termUnit.forEach((u, j) => ((units[tb.tree.terms.sample[j] as number] as number[])[tb.termToken[j] as number] = u));
  const meta = sampleMeta(batch.samples);
  return batch.samples.map((s, i) => ({
    ...(meta[i] as SampleMeta),
    tokens: s.tokenIds,
    lossMask: s.lossMask,
    advantage: s.advantages.map(Math.fround),
    oldLogprob: s.oldLogprobs.map(Math.fround),
    weight: s.weights.map(Math.fround),
    unit: units[i] as number[],
  }));
}

/** Write `<name>.safetensors`, `<name>.arrow` and `<name>.expected.json` (samples, loss, id) of every fixture into `dir`. */
export function writePythonFixtures(dir: string): string[] {
  return Object.entries(PYTHON_FIXTURES).map(([name, { estimator, mode }]) => {
    const batch = pythonFixtureBatch(`fixture-${name}`, estimator, mode);
    writeFileSync(join(dir, `${name}.safetensors`), batchToSafetensors(batch));
    writeFileSync(join(dir, `${name}.arrow`), batchToArrow(batch));
    writeFileSync(join(dir, `${name}.expected.json`), JSON.stringify({ batchId: batch.id, loss: batch.loss, programs: batch.programs ?? null, samples: expectedSamples(batch) }));
    return name;
  });
}
