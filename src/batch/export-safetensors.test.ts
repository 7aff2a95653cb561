import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { writeSafetensors, type AnyTensor } from "../model/safetensors.js";
import { createGspo } from "./estimators/gspo.js";
import { fixtureSet } from "../testing/estimator-fixtures.js";
import { readTreeSafetensors, SAFETENSORS_SCHEMA_VERSION, writeTreeSafetensors } from "./export-safetensors.js";
import { buildTreeBatch, type TreeBatch } from "./tree/tree-batch.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-st-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function batch(): TreeBatch {
  const { samples, loss } = createGspo().score(
    fixtureSet([
      { id: "a", group: "g", reward: 1, chunks: [2, 2] },
      { id: "b", group: "g", reward: 0, chunks: [3] },
    ]),
  );
  return buildTreeBatch(samples, loss);
}

const INT_TENSORS = ["tokens", "parents", "positions", "term_node", "term_target", "term_sample", "term_unit", "term_token", "sample_offsets", "sample_paths"];
const FLOAT_TENSORS = ["term_advantage", "term_old_logprob", "term_weight"];
type Entry = { dtype: string; shape: number[]; data_offsets: [number, number] };

describe("safetensors tree export", () => {
  it("round-trips the packed tree, its units and loss", () => {
    const tb = batch();
    const path = join(dir, "b.safetensors");
    writeTreeSafetensors(path, tb, "batch-1");
    const back = readTreeSafetensors(path);
    expect(back.batchId).toBe("batch-1");
    expect(back.tree).toEqual(tb.tree);
    expect(back.termUnit).toEqual(tb.termUnit);
    expect(back.termToken).toEqual(tb.termToken);
    expect(back.loss).toEqual(tb.loss);
    expect(back.stats).toEqual(tb.stats);
  });

  it("stores ids and indices as I32 and the rest as F32, readable by a hand-written parser", () => {
    const tb = batch();
    // Ids beyond 2^24 (not exact in F32) and at the int32 limits survive: I32 holds them exactly.
    tb.tree.tokens[1] = 2 ** 24 + 1;
    tb.tree.tokens[2] = 2 ** 31 - 1;
    const path = join(dir, "i32.safetensors");
    writeTreeSafetensors(path, tb, "batch-2");

    const buf = readFileSync(path);
    const n = Number(buf.readBigUInt64LE(0));
    expect(n % 8).toBe(0);
    const { __metadata__: meta, ...header } = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, Entry> & {
      __metadata__: Record<string, string>;
    };
    expect(meta["arbor.schema"]).toBe("arbor.tree.v2");
    expect(SAFETENSORS_SCHEMA_VERSION).toBe("arbor.tree.v2");
    expect(Object.keys(header).sort()).toEqual([...INT_TENSORS, ...FLOAT_TENSORS].sort());

    const flatPaths = tb.tree.samplePaths.reduce((s, p) => s + p.length, 0);
    const lengths: Record<string, number> = {
      tokens: tb.tree.tokens.length,
      parents: tb.tree.tokens.length,
      positions: tb.tree.tokens.length,
      sample_offsets: tb.tree.samplePaths.length + 1,
      sample_paths: flatPaths,
    };
    const terms = tb.tree.terms.node.length;
    // Offsets tile the byte buffer in write order, with no holes, each tensor 4-byte aligned.
    let end = 0;
    const sorted = Object.entries(header).sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]);
    for (const [name, info] of sorted) {
      expect(info.dtype).toBe(INT_TENSORS.includes(name) ? "I32" : "F32");
      expect(info.shape).toEqual([lengths[name] ?? terms]);
      expect(info.data_offsets).toEqual([end, end + 4 * info.shape[0]!]);
      end = info.data_offsets[1];
    }
    expect(buf.length).toBe(8 + n + end);

    // A plain Int32Array view of the buffer reads the I32 tensors.
    const data = buf.buffer.slice(buf.byteOffset + 8 + n, buf.byteOffset + buf.length);
    const view = (name: string): Int32Array => new Int32Array(data, header[name]!.data_offsets[0], header[name]!.shape[0]);
    expect(view("tokens")).toEqual(tb.tree.tokens);
    expect(view("tokens")[1]).toBe(16777217);
    expect(view("parents")).toEqual(tb.tree.parents);
    expect(view("term_target")).toEqual(tb.tree.terms.target);
    expect(view("sample_paths")).toEqual(Int32Array.from(tb.tree.samplePaths.flatMap((p) => Array.from(p))));
    const adv = header["term_advantage"]!;
    expect(new Float32Array(data, adv.data_offsets[0], adv.shape[0])).toEqual(tb.tree.terms.advantage);

    expect(readTreeSafetensors(path).tree.tokens).toEqual(tb.tree.tokens);
  });

  it("still reads arbor.tree.v1 files (integers as F32) and refuses other schemas and wrong dtypes clearly", () => {
    const tb = batch();
    const v2 = join(dir, "v2.safetensors");
    writeTreeSafetensors(v2, tb, "batch-3");
    // Rewrite the same tensors under another schema label, choosing per tensor whether an integer one is F32 (as
    // the v1 writer stored it) or I32; `edit` may change the values.
    const rewrite = (schema: string, asF32: (name: string) => boolean, edit?: (name: string, data: Float32Array | Int32Array) => void): string => {
      const p = join(dir, `${schema}.safetensors`);
      const buf = readFileSync(v2);
      const n = Number(buf.readBigUInt64LE(0));
      const { __metadata__: meta, ...header } = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, Entry> & {
        __metadata__: Record<string, string>;
      };
      const data = buf.buffer.slice(buf.byteOffset + 8 + n, buf.byteOffset + buf.length);
      const tensors = Object.entries(header).map(([name, info]): AnyTensor => {
        const [begin] = info.data_offsets;
        const len = info.shape[0]!;
        const ints = info.dtype === "I32" ? new Int32Array(data, begin, len) : null;
        const values = ints ? (asF32(name) ? Float32Array.from(ints) : ints.slice()) : new Float32Array(data, begin, len).slice();
        edit?.(name, values);
        return values instanceof Int32Array ? { name, shape: info.shape, data: values } : { name, shape: info.shape, data: values };
      });
      writeSafetensors(p, tensors, { ...meta, "arbor.schema": schema });
      return p;
    };
    const v1 = readTreeSafetensors(rewrite("arbor.tree.v1", () => true));
    expect(v1.batchId).toBe("batch-3");
    expect(v1.tree).toEqual(tb.tree);
    expect(v1.termUnit).toEqual(tb.termUnit);
    expect(v1.termToken).toEqual(tb.termToken);
    expect(v1.loss).toEqual(tb.loss);

    expect(() => readTreeSafetensors(rewrite("arbor.tree.v9", () => false))).toThrow(
      /schema is 'arbor.tree.v9', expected 'arbor.tree.v2' \(or the older 'arbor.tree.v1'\)/,
    );
    expect(() => readTreeSafetensors(rewrite("arbor.tree.v9", () => false))).toThrow(ArborError);
    // A v2 file with an F32 integer tensor, or a v1 file with an I32 one, names the tensor and the expected dtype.
    expect(() => readTreeSafetensors(rewrite("arbor.tree.v2", (name) => name === "parents"))).toThrow(
      /tensor 'parents' is F32, schema arbor.tree.v2 stores it as I32/,
    );
    expect(() => readTreeSafetensors(rewrite("arbor.tree.v1", (name) => name !== "term_node"))).toThrow(
      /tensor 'term_node' is I32, schema arbor.tree.v1 stores it as F32/,
    );
    const fractional = rewrite("arbor.tree.v1", () => true, (name, d) => {
      if (name === "positions") d[2] = 1.5;
    });
    expect(() => readTreeSafetensors(fractional)).toThrow(/tensor 'positions'\[2\] = 1.5 is not an int32/);
  });
});
