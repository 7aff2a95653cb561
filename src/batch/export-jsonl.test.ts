import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readSamplesJsonl, writeSamplesJsonl } from "./export-jsonl.js";
import type { ScoredSample } from "./batch-sample.js";

const TRICKY = [-1e-12, -23.5, -Number.MIN_VALUE, -0.1, -1 / 3, -1.7976931348623157e308, -123456.789012345];

function sample(i: number): ScoredSample {
  const out = TRICKY.map((_, k) => 0x7fffffff - k - i);
  const advantage = i % 2 === 0 ? 0.8660246013 : -1 / 3;
  return {
    id: `p${i}#s0`,
    programId: `p${i}`,
    groupId: "g",
    taskId: "t \"quoted\" ✓",
    callIds: [`p${i}-c0`],
    segment: 0,
    tokenIds: [1, 2, 3, ...out],
    lossMask: [0, 0, 0, ...out.map(() => 1)],
    oldLogprobs: [0, 0, 0, ...TRICKY],
    versions: [-1, -1, -1, ...out.map(() => 2)],
    chunks: [-1, -1, -1, ...out.map(() => 0)],
    advantages: [0, 0, 0, ...out.map(() => advantage)],
    weights: [0, 0, 0, ...out.map(() => i / 7)],
  };
}

function bits(xs: number[]): string {
  return Buffer.from(new Float64Array(xs).buffer).toString("hex");
}

describe("samples JSONL", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "arbor-jsonl-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("round-trips exactly, one line per sample, creating parent directories", async () => {
    const samples = Array.from({ length: 300 }, (_, i) => sample(i));
    const path = join(dir, "a", "b", "batch.jsonl");
    await writeSamplesJsonl(path, samples);
    expect(readFileSync(path, "utf8").split("\n")).toHaveLength(301);
    expect(existsSync(`${path}.partial`)).toBe(false);
    const back = await readSamplesJsonl(path);
    expect(back).toEqual(samples);
    back.forEach((s, i) => {
      expect(bits(s.oldLogprobs)).toBe(bits(samples[i]?.oldLogprobs ?? []));
      expect(bits([...s.advantages, ...s.weights])).toBe(bits([...(samples[i]?.advantages ?? []), ...(samples[i]?.weights ?? [])]));
    });
    await writeSamplesJsonl(path, []);
    expect(await readSamplesJsonl(path)).toEqual([]);
  });

  it("refuses a sample JSON cannot hold exactly and leaves no file behind", async () => {
    const bad = sample(0);
    bad.oldLogprobs[4] = -Infinity;
    const path = join(dir, "bad.jsonl");
    await expect(writeSamplesJsonl(path, [sample(1), bad])).rejects.toThrow(
      "sample 1 (program 'p0'): oldLogprobs: must be an array of finite numbers",
    );
    expect(existsSync(path)).toBe(false);
    expect(existsSync(`${path}.partial`)).toBe(false);
  });

  it("names the line and field of a malformed file, and a missing file", async () => {
    const path = join(dir, "m.jsonl");
    const good = JSON.stringify(sample(0));
    writeFileSync(path, `${good}\n{"id": "x", "programId": 1}\n`);
    await expect(readSamplesJsonl(path)).rejects.toThrow(`${path}:2: programId: must be a string`);
    writeFileSync(path, `${good}\n\n${good.replace('"lossMask":[0,', '"lossMask":[')}\n`);
    await expect(readSamplesJsonl(path)).rejects.toThrow(/m.jsonl:3: lossMask: must have as many entries as tokenIds \(10\)/);
    writeFileSync(path, `${good.replace('"segment":0', '"segment":-1')}\n`);
    await expect(readSamplesJsonl(path)).rejects.toThrow(/m.jsonl:1: segment: must be an integer >= 0/);
    writeFileSync(path, `${good.replace('"versions":[-1,', '"versions":[-2,')}\n`);
    await expect(readSamplesJsonl(path)).rejects.toThrow(/m.jsonl:1: versions: must be an array of integers >= -1/);
    writeFileSync(path, `${good}\nnot json\n`);
    await expect(readSamplesJsonl(path)).rejects.toThrow(/m.jsonl:2: invalid JSON/);
    await expect(readSamplesJsonl(join(dir, "none.jsonl"))).rejects.toThrow(/cannot read samples .*none.jsonl: no such file/);
  });
});
