import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createGspo } from "./estimators/gspo.js";
import { fixtureSet } from "./estimators/test-fixtures.js";
import { readTreeSafetensors, writeTreeSafetensors } from "./export-safetensors.js";
import { buildTreeBatch } from "./tree/tree-batch.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-st-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("safetensors tree export", () => {
  it("round-trips the packed tree, its units and loss", () => {
    const { samples, loss } = createGspo().score(
      fixtureSet([
        { id: "a", group: "g", reward: 1, chunks: [2, 2] },
        { id: "b", group: "g", reward: 0, chunks: [3] },
      ]),
    );
    const tb = buildTreeBatch(samples, loss);
    const path = join(dir, "b.safetensors");
    writeTreeSafetensors(path, tb, "batch-1");
    const back = readTreeSafetensors(path);
    expect(back.batchId).toBe("batch-1");
    expect(back.tree).toEqual(tb.tree);
    expect(back.termUnit).toEqual(tb.termUnit);
    expect(back.termToken).toEqual(tb.termToken);
    expect(back.loss).toEqual(loss);
    expect(back.stats).toEqual(tb.stats);
  });

  it("refuses integers F32 cannot hold exactly", () => {
    const { samples, loss } = createGspo().score(fixtureSet([{ id: "a", group: "g", reward: 1, chunks: [2] }]));
    samples[0]!.tokenIds[0] = 2 ** 24 + 1;
    expect(() => writeTreeSafetensors(join(dir, "x.safetensors"), buildTreeBatch(samples, loss), "x")).toThrow(/tokens\[0\] = 16777217 is beyond 2\^24/);
  });
});
