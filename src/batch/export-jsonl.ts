// A batch's scored samples as JSON Lines, one sample per line (exactly the samples the trainer is given:
// the batch builder's, build-batch.ts): streamed to disk (atomic rename when done) and read back with every
// field validated, so a trainer never sees a half-written or malformed batch.
import { createReadStream } from "node:fs";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ArborError } from "../core/errors.js";
import type { ScoredSample } from "./batch-sample.js";

const STRING_FIELDS = ["id", "programId", "groupId", "taskId"] as const;
/** Per-token arrays, each `tokenIds.length` long, with what each entry must be. */
const TOKEN_FIELDS: readonly [keyof ScoredSample, string, (x: unknown) => boolean][] = [
  ["tokenIds", "integers >= 0", (x) => Number.isInteger(x) && (x as number) >= 0],
  ["lossMask", "0/1", (x) => x === 0 || x === 1],
  ["oldLogprobs", "finite numbers", (x) => typeof x === "number" && Number.isFinite(x)],
  ["versions", "integers >= -1", (x) => Number.isInteger(x) && (x as number) >= -1],
  ["chunks", "integers >= -1", (x) => Number.isInteger(x) && (x as number) >= -1],
  ["advantages", "finite numbers", (x) => typeof x === "number" && Number.isFinite(x)],
  ["weights", "finite numbers", (x) => typeof x === "number" && Number.isFinite(x)],
];

function fail(message: string): never {
  throw new ArborError(message, "batch");
}

/** Check one sample's shape; `where` prefixes every error (e.g. `file.jsonl:3`). */
function validateSample(s: unknown, where: string): ScoredSample {
  if (typeof s !== "object" || s === null || Array.isArray(s)) fail(`${where}: sample must be an object`);
  const o = s as Record<string, unknown>;
  for (const f of STRING_FIELDS) if (typeof o[f] !== "string") fail(`${where}: ${f}: must be a string`);
  if (!Array.isArray(o.callIds) || !o.callIds.every((c) => typeof c === "string")) fail(`${where}: callIds: must be an array of strings`);
  if (typeof o.segment !== "number" || !Number.isInteger(o.segment) || o.segment < 0) fail(`${where}: segment: must be an integer >= 0`);
  for (const [f, what, ok] of TOKEN_FIELDS) {
    const v = o[f];
    if (!Array.isArray(v) || !v.every(ok)) fail(`${where}: ${f}: must be an array of ${what}`);
  }
  const n = (o.tokenIds as unknown[]).length;
  const bad = TOKEN_FIELDS.filter(([f]) => (o[f] as unknown[]).length !== n);
  if (bad.length > 0) fail(`${where}: ${bad.map(([f]) => f).join(", ")}: must have as many entries as tokenIds (${n})`);
  return o as unknown as ScoredSample;
}

function* lines(samples: readonly ScoredSample[]): Generator<string> {
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
export async function writeSamplesJsonl(path: string, samples: readonly ScoredSample[]): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.partial`;
  // Opened before the first line is made: a stream that opens its file itself may create it after a bad sample
  // failed the pipeline and the partial file was removed, leaving it behind.
  const file = await open(partial, "w");
  try {
    await pipeline(Readable.from(lines(samples)), file.createWriteStream());
    await rename(partial, path);
  } catch (e) {
    await rm(partial, { force: true });
    throw e;
  }
}

/** Read a JSONL sample file written by {@link writeSamplesJsonl}. Errors name `path:line` and the field. */
export async function readSamplesJsonl(path: string): Promise<ScoredSample[]> {
  const stream = createReadStream(path, { encoding: "utf8" });
  const out: ScoredSample[] = [];
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
