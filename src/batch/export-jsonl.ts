// Training samples as JSON Lines, one sample per line: streamed to disk (atomic rename when done)
// and read back with every field validated, so a trainer never sees a half-written or malformed batch.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ArborError } from "../core/errors.js";
import type { TrainingSample } from "./samples.js";

const STRING_FIELDS = ["programId", "groupId", "taskId", "callId"] as const;
const INT_FIELDS = ["callIndex", "policyVersion"] as const;
const NUMBER_FIELDS = ["advantage", "reward"] as const;

function fail(message: string): never {
  throw new ArborError(message, "batch");
}

/** Check one sample's shape; `where` prefixes every error (e.g. `file.jsonl:3`). */
function validateSample(s: unknown, where: string): TrainingSample {
  if (typeof s !== "object" || s === null || Array.isArray(s)) fail(`${where}: sample must be an object`);
  const o = s as Record<string, unknown>;
  for (const f of STRING_FIELDS) if (typeof o[f] !== "string") fail(`${where}: ${f}: must be a string`);
  for (const f of INT_FIELDS) {
    if (typeof o[f] !== "number" || !Number.isInteger(o[f]) || (o[f] as number) < 0) fail(`${where}: ${f}: must be an integer >= 0`);
  }
  for (const f of NUMBER_FIELDS) if (typeof o[f] !== "number" || !Number.isFinite(o[f])) fail(`${where}: ${f}: must be a finite number`);
  const tokenIds = o.tokenIds;
  const lossMask = o.lossMask;
  const oldLogprobs = o.oldLogprobs;
  if (!Array.isArray(tokenIds) || !tokenIds.every((t) => Number.isInteger(t) && t >= 0)) {
    fail(`${where}: tokenIds: must be an array of integers >= 0`);
  }
  if (!Array.isArray(lossMask) || !lossMask.every((m) => m === 0 || m === 1)) fail(`${where}: lossMask: must be an array of 0/1`);
  if (!Array.isArray(oldLogprobs) || !oldLogprobs.every((l) => typeof l === "number" && Number.isFinite(l))) {
    fail(`${where}: oldLogprobs: must be an array of finite numbers`);
  }
  if (lossMask.length !== tokenIds.length || oldLogprobs.length !== tokenIds.length) {
    const lengths = `${tokenIds.length}, ${lossMask.length}, ${oldLogprobs.length}`;
    fail(`${where}: tokenIds, lossMask and oldLogprobs must have equal lengths (${lengths})`);
  }
  return o as unknown as TrainingSample;
}

function* lines(samples: readonly TrainingSample[]): Generator<string> {
  for (let i = 0; i < samples.length; i++) {
    // JSON has no Infinity/NaN: refuse instead of letting them become null.
    const s = validateSample(samples[i], `sample ${i} (program '${samples[i]?.programId}')`);
    yield JSON.stringify(s) + "\n";
  }
}

/**
 * Write samples to `path` as JSONL, streaming with back-pressure; parent directories are created.
 * The file appears only when complete (written as `path.partial`, then renamed). Throws an
 * {@link ArborError} naming the sample and field for a malformed sample (e.g. an infinite logprob).
 */
export async function writeSamplesJsonl(path: string, samples: readonly TrainingSample[]): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.partial`;
  try {
    await pipeline(Readable.from(lines(samples)), createWriteStream(partial));
    await rename(partial, path);
  } catch (e) {
    await rm(partial, { force: true });
    throw e;
  }
}

/** Read a JSONL sample file written by {@link writeSamplesJsonl}. Errors name `path:line` and the field. */
export async function readSamplesJsonl(path: string): Promise<TrainingSample[]> {
  const stream = createReadStream(path, { encoding: "utf8" });
  const out: TrainingSample[] = [];
  let lineNo = 0;
  try {
    for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) {
      lineNo++;
      if (line.trim() === "") continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch (e) {
        fail(`${path}:${lineNo}: invalid JSON: ${(e as Error).message}`);
      }
      out.push(validateSample(parsed, `${path}:${lineNo}`));
    }
  } catch (e) {
    if (e instanceof ArborError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    fail(`cannot read samples ${path}: ${code === "ENOENT" ? "no such file" : (e as Error).message}`);
  } finally {
    stream.destroy();
  }
  return out;
}
