import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "../model/config.js";
import { configFromGguf, readGguf, vocabTokenizerSpec } from "../model/gguf.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { checkpointFileName, MANIFEST_FILE, readManifest, writeCheckpoint } from "./checkpoint.js";

const root = mkdtempSync(join(tmpdir(), "arbor-ckpt-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const vocab = new Vocab();
const tokenizer = vocabTokenizerSpec(vocab);
const config = tinyConfig({ nVocab: vocab.size, nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 32, contextLength: 1024 });
const tensors = initWeights(config, new Rng(1));

describe("writeCheckpoint", () => {
  it("writes policy-v{N}.gguf with the version inside, then a manifest pointing at it", () => {
    const dir = join(root, "a");
    expect(readManifest(dir)).toBeUndefined();
    const { path, manifest } = writeCheckpoint({ dir, version: 4, config, tokenizer, tensors, steps: 4, now: 123 });
    expect(path).toBe(join(dir, "policy-v4.gguf"));
    expect(manifest).toEqual({ format: 1, version: 4, file: "policy-v4.gguf", steps: 4, publishedAt: 123, retained: [4] });
    expect(readManifest(dir)).toEqual(manifest);
    const g = readGguf(path);
    expect(g.metadata.get("arbor.policy_version")).toBe(4);
    expect(configFromGguf(g.metadata)).toEqual({ ...config, rmsEps: Math.fround(config.rmsEps) });
    expect(g.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
    expect(g.tensors[3]!.data).toEqual(tensors[3]!.data);
    // Atomic writes leave no temp files behind.
    expect(readdirSync(dir).sort()).toEqual([MANIFEST_FILE, "policy-v4.gguf"]);
  });

  it("keeps only the newest `keep` versions and refuses a version that is not newer", () => {
    const dir = join(root, "b");
    for (const v of [1, 2, 3, 5]) writeCheckpoint({ dir, version: v, config, tokenizer, tensors, steps: v, now: v, keep: 2 });
    expect(readManifest(dir)?.retained).toEqual([3, 5]);
    expect(existsSync(join(dir, checkpointFileName(2)))).toBe(false);
    expect(existsSync(join(dir, checkpointFileName(3)))).toBe(true);
    expect(() => writeCheckpoint({ dir, version: 5, config, tokenizer, tensors, steps: 5, now: 9 })).toThrow(/version 5 is not newer than the published version 5/);
    expect(() => writeCheckpoint({ dir, version: 6, config, tokenizer, tensors, steps: 6, now: 9, keep: 0 })).toThrow(/keep must be an integer >= 1/);
  });

  it("reports a corrupt manifest instead of guessing", () => {
    const dir = join(root, "c");
    writeCheckpoint({ dir, version: 0, config, tokenizer, tensors, steps: 0, now: 0 });
    writeFileSync(join(dir, MANIFEST_FILE), "{not json");
    expect(() => readManifest(dir)).toThrow(/manifest.json is not valid JSON/);
    writeFileSync(join(dir, MANIFEST_FILE), JSON.stringify({ version: 1 }));
    expect(() => readManifest(dir)).toThrow(/not an Arbor checkpoint manifest/);
  });
});

describe("checkpoints of a non-Arbor model", () => {
  it("keep the model's own tokenizer and chat template (a made-here BPE + ChatML model)", async () => {
    const { makeModel } = await import("../model/made/made-models.js");
    const { tokenizerSpecFromGguf } = await import("../model/gguf-tokenizer.js");
    const { Trainer } = await import("./trainer.js");
    const dir = mkdtempSync(join(tmpdir(), "arbor-ckpt-bpe-"));
    try {
      const made = makeModel("bpe-chatml", dir, { seed: 3, nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 32, contextLength: 1024 });
      const original = tokenizerSpecFromGguf(readGguf(made.path).metadata);
      const trainer = await Trainer.fromGguf(made.path);
      try {
        const { path } = trainer.checkpoint(join(dir, "ckpt"));
        const written = readGguf(path).metadata;
        expect(tokenizerSpecFromGguf(written)).toEqual(original);
        expect(original.chatTemplate).toContain("<|im_start|>");
        expect(configFromGguf(written).nVocab).toBe(original.tokens.length);
      } finally {
        trainer.dispose();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
