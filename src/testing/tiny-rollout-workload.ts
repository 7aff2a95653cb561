// A rollout workload file small enough for a test to run every system of it in about a second (two engines,
// 8 groups of 4), for the tests of `arbor sim` and of what sums up its reports.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";

/** The workload file's text (`kind: rollout`, named `tiny`). */
export const TINY_ROLLOUT_YAML = `
name: tiny
kind: rollout
description: a tiny rollout
sources: ["made up for the test"]
cluster: { gpus: 2, gpusPerInstance: 1, profile: moonlight-16b-a3b/h800, maxNumSeqs: 8, kvTokensPerInstance: 6000 }
workload: { prompts: 8, groupSize: 4, maxTokens: 800, meanTokens: 250, promptTokens: [16, 64], groupSigma: 0.8, sampleSigma: 0.5 }
divided: { chunkTokens: 128 }
sampleMs: 500
`;

/** Writes the workload to `<dir>/tiny.yaml` and returns its path. */
export async function writeTinyRolloutWorkload(dir: string): Promise<string> {
  const file = join(dir, "tiny.yaml");
  await writeFile(file, TINY_ROLLOUT_YAML);
  return file;
}
