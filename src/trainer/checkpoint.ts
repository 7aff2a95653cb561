// Versioned checkpoints for the engines: `policy-v{N}.gguf` (the GGUF llama.cpp loads) plus
// `manifest.json` naming the latest version. Both are written atomically and the manifest only after
// its GGUF is in place, so a reader that follows the manifest never sees a missing or partial file.
// Old versions beyond `keep` are removed (with the optimizer state saved beside them) so a long run does not fill the disk.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ArborError } from "../core/errors.js";
import type { TinyLlamaConfig } from "../model/config.js";
import { writeFileAtomic } from "../model/atomic-file.js";
import { writeGguf } from "../model/gguf.js";
import type { GgufTokenizerSpec } from "../model/gguf-tokenizer.js";
import type { Tensor } from "../model/weights.js";

export const MANIFEST_FILE = "manifest.json";

/** What `manifest.json` holds: the latest published policy. */
export interface CheckpointManifest {
  format: 1;
  version: number;
  /** File name of the GGUF, relative to the manifest's directory. */
  file: string;
  /** Optimizer steps taken to reach this version. */
  steps: number;
  /** Clock time (ms) of publication. */
  publishedAt: number;
  /** Versions still on disk, oldest first. */
  retained: number[];
}

export interface CheckpointInput {
  dir: string;
  version: number;
  config: TinyLlamaConfig;
  /** The model's tokenizer and chat template (the checkpoint keeps the model's vocabulary). */
  tokenizer: GgufTokenizerSpec;
  tensors: Tensor[];
  steps: number;
  now: number;
  /** How many versions to keep on disk (>= 1, default 3). */
  keep?: number;
}

/** `policy-v{N}.gguf`. */
export function checkpointFileName(version: number): string {
  return `policy-v${version}.gguf`;
}

/** `policy-v{N}.adam.safetensors`: the reference trainer's optimizer state beside the checkpoint of version N. */
export function optimizerFileName(version: number): string {
  return `policy-v${version}.adam.safetensors`;
}

const FILE_RE = /^policy-v(\d+)\.gguf$/;

/** Write version `version` and point the manifest at it; returns the GGUF path and the manifest. */
export function writeCheckpoint(input: CheckpointInput): { path: string; manifest: CheckpointManifest } {
  const keep = input.keep ?? 3;
  if (!Number.isInteger(input.version) || input.version < 0) throw new ArborError(`checkpoint: version must be an integer >= 0, got ${input.version}`, "config");
  if (!Number.isInteger(keep) || keep < 1) throw new ArborError(`checkpoint: keep must be an integer >= 1, got ${keep}`, "config");
  mkdirSync(input.dir, { recursive: true });
  const previous = readManifest(input.dir);
  if (previous && previous.version >= input.version) {
    throw new ArborError(`checkpoint: version ${input.version} is not newer than the published version ${previous.version} in ${input.dir}`, "checkpoint");
  }
  const file = checkpointFileName(input.version);
  const path = join(input.dir, file);
  writeGguf(path, {
    config: input.config,
    tokenizer: input.tokenizer,
    tensors: input.tensors,
    metadata: { "general.name": "arbor-tiny-llama", "arbor.policy_version": input.version },
  });
  const versions = readdirSync(input.dir)
    .map((f) => FILE_RE.exec(f)?.[1])
    .filter((v): v is string => v !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
  const retained = versions.slice(-keep);
  const manifest: CheckpointManifest = { format: 1, version: input.version, file, steps: input.steps, publishedAt: input.now, retained };
  writeFileAtomic(join(input.dir, MANIFEST_FILE), (put) => put(new TextEncoder().encode(`${JSON.stringify(manifest, null, 2)}\n`)));
  for (const v of versions.slice(0, -keep)) {
    rmSync(join(input.dir, checkpointFileName(v)), { force: true });
    rmSync(join(input.dir, optimizerFileName(v)), { force: true });
  }
  return { path, manifest };
}

/** The manifest of `dir`, or undefined when none was published yet. Throws ArborError when it is corrupt. */
export function readManifest(dir: string): CheckpointManifest | undefined {
  const path = join(dir, MANIFEST_FILE);
  if (!existsSync(path)) return undefined;
  let m: Partial<CheckpointManifest>;
  try {
    m = JSON.parse(readFileSync(path, "utf8")) as Partial<CheckpointManifest>;
  } catch (err) {
    throw new ArborError(`checkpoint: ${path} is not valid JSON (${(err as Error).message})`, "checkpoint");
  }
  if (m.format !== 1 || !Number.isInteger(m.version) || typeof m.file !== "string") {
    throw new ArborError(`checkpoint: ${path} is not an Arbor checkpoint manifest (format 1 with version and file)`, "checkpoint");
  }
  return m as CheckpointManifest;
}

/**
 * Remove checkpoints and optimizer states of versions after `version`, and a manifest that names one: what a killed
 * run published after its last recorded step, which the resumed run publishes again (versions must increase).
 * Returns the versions whose checkpoints it removed, in increasing order.
 */
export function removeCheckpointsAfter(dir: string, version: number): number[] {
  if (!existsSync(dir)) return [];
  const removed = new Set<number>();
  for (const f of readdirSync(dir)) {
    const v = /^policy-v(\d+)\./.exec(f)?.[1];
    if (v === undefined || Number(v) <= version) continue;
    rmSync(join(dir, f), { force: true });
    if (f === checkpointFileName(Number(v))) removed.add(Number(v));
  }
  const manifest = readManifest(dir);
  // The next checkpoint must be newer than the manifest's version: the next step writes a fresh one.
  if (manifest !== undefined && manifest.version > version) rmSync(join(dir, MANIFEST_FILE), { force: true });
  return [...removed].sort((a, b) => a - b);
}
