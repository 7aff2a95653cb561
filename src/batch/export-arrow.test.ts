import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tableFromIPC, tableToIPC, makeTable } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { createDapo } from "./estimators/dapo.js";
import { createChunkedMdp } from "./estimators/chunked-mdp.js";
import { fixtureSet } from "../testing/estimator-fixtures.js";
import { batchFromArrow, batchToArrow, readArrowBatch, writeArrowBatch, type ExportedBatch } from "./export-arrow.js";
import { buildTreeBatch } from "./tree/tree-batch.js";

function batch(): ExportedBatch {
  const set = fixtureSet([
    { id: "p0", group: "g", reward: 1, chunks: [2, 3] },
    { id: "p1", group: "g", reward: 0, chunks: [3] },
    { id: "p2", group: "g", reward: 0.25, chunks: [1, 1, 1] },
  ]);
  // Values float32 cannot hold: the file must keep them exactly.
  set.samples[0]!.oldLogprobs[2] = -1e-12;
  set.samples[1]!.oldLogprobs[1] = -23.500000000000004;
  const { samples, loss } = createChunkedMdp({ gamma: 0.9 }).score(set);
  return { id: "batch-7", samples, loss, programs: set.programs };
}

describe("Arrow batch export", () => {
  it("round-trips every sample exactly, with the loss spec and tree stats", () => {
    const b = batch();
    const back = batchFromArrow(batchToArrow(b));
    expect(back.id).toBe("batch-7");
    expect(back.samples).toEqual(b.samples);
    expect(back.programs).toEqual(b.programs);
    expect(back.programs?.map((p) => p.reward)).toEqual([1, 0, 0.25]);
    expect(back.loss).toEqual(b.loss);
    expect(back.stats).toEqual(buildTreeBatch(b.samples, b.loss).stats);
  });

  it("carries the tree: deduplicating rows by node rebuilds the packed tree and its ratio units", () => {
    const b = batch();
    const table = tableFromIPC(batchToArrow(b));
    const tb = buildTreeBatch(b.samples, b.loss);
    const node = table.getChild("node")!.toArray() as Int32Array;
    const parent = table.getChild("parent")!.toArray() as Int32Array;
    const tokenId = table.getChild("token_id")!.toArray() as Int32Array;
    const position = table.getChild("position")!.toArray() as Int32Array;
    const unit = table.getChild("unit")!.toArray() as Int32Array;
    const mask = table.getChild("loss_mask")!.toArray() as Uint8Array;
    const n = tb.tree.tokens.length;
    const tokens = new Int32Array(n).fill(-9);
    const parents = new Int32Array(n).fill(-9);
    const positions = new Int32Array(n).fill(-9);
    for (let r = 0; r < table.numRows; r++) {
      tokens[node[r]!] = tokenId[r]!;
      parents[node[r]!] = parent[r]!;
      positions[node[r]!] = position[r]!;
    }
    expect(tokens).toEqual(tb.tree.tokens);
    expect(parents).toEqual(tb.tree.parents);
    expect(positions).toEqual(tb.tree.positions);
    // Units sit on loss rows only, in term order.
    expect(Int32Array.from(Array.from(unit).filter((_, r) => mask[r] === 1))).toEqual(tb.termUnit);
    expect(Array.from(unit).filter((u, r) => mask[r] === 0 && u !== -1)).toEqual([]);
    expect(tb.stats.treeTokens).toBeLessThan(tb.stats.flatTokens);
  });

  it("keeps an empty batch (a DAPO batch whose groups were all dropped) readable", () => {
    const { samples, loss } = createDapo().score(fixtureSet([{ id: "p0", group: "g", reward: 1, chunks: [2] }]));
    expect(samples).toEqual([]);
    expect(batchFromArrow(batchToArrow({ id: "empty", samples, loss })).samples).toEqual([]);
  });

  it("writes and reads batch files", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-arrow-"));
    try {
      const b = batch();
      writeArrowBatch(join(dir, "b.arrow"), b);
      expect(readArrowBatch(join(dir, "b.arrow")).samples).toEqual(b.samples);
      expect(() => readArrowBatch(join(dir, "missing.arrow"))).toThrow(/cannot read .*missing.arrow: no such file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rejects other files with a clear error", () => {
    expect(() => batchFromArrow(new Uint8Array([1, 2, 3]))).toThrow(/arrow batch: not an Arrow IPC file/);
    const other = tableToIPC(makeTable({ x: new Int32Array([1]) }), "file");
    expect(() => batchFromArrow(other)).toThrow(/schema is 'undefined', this reader understands 'arbor.batch.v1'/);
  });
});
