// Grouped-query attention as one differentiable op whose every matrix product runs on tfjs-wasm's fast
// (XNNPACK) path: per KV head, the query heads that share it are stacked along the rows, and each product —
// scores Q·Kᵀ, output P·V and, in the backward pass, dP = dO·Vᵀ, dQ = dS·K, dKᵀ = Qᵀ·dS, dVᵀ = dOᵀ·P — is an
// untransposed 2-D matMul, with only the small [rows, headDim] operands transposed. tf.matMul's own gradient
// and any batched product fall to the back-end's scalar loop, which made attention most of a step. The
// softmax backward is written out as FlashAttention's: dS = P ⊙ (dP − D) with D_i = Σ_j dO_ij·O_ij, which equals
// rowsum(dP ⊙ P) (Σ_j P_ij (dO_i·V_j) = dO_i·O_i) but costs [rows, headDim] instead of another [rows, keys]
// product, and keeps only P and O per head.
// `treeAttention` is the same maths over every chain of a packed prefix tree as ONE op: the per-head
// reshapes, transposes and gradient sums happen once for the tree, not once per chain (which made a tree
// with many short chains, e.g. many short calls, pay per-chain overhead that flat packing does not).
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";
import type { SegmentAttention } from "./attention-mask.js";

type GradArgs = (tf.Tensor | tf.GradSaveFunc)[];

/** Per-KV-head 2-D slices [group·r, hd] of q [r, nHead, hd] (llama.cpp maps query head h to KV head ⌊h / group⌋). */
function headsOf(q: tf.Tensor3D, nHeadKv: number): tf.Tensor2D[] {
  const [r, nHead, hd] = q.shape;
  return tf.unstack(tf.reshape(tf.transpose(q, [1, 0, 2]), [nHeadKv, (nHead / nHeadKv) * r, hd])) as tf.Tensor2D[];
}

/** Inverse of {@link headsOf}: per-KV-head [group·r, hd] blocks back to [r, nHead·hd]. */
function mergeHeads(parts: tf.Tensor2D[], r: number, nHead: number, hd: number): tf.Tensor2D {
  return tf.reshape(tf.transpose(tf.reshape(tf.stack(parts), [nHead, r, hd]), [1, 0, 2]), [r, nHead * hd]);
}

/**
 * Attention of queries q [r, nHead, hd] over keys and values [m, nHeadKv, hd] with the row-major r×m additive
 * mask `mask` (0 visible, MASKED hidden) and score scale `scale`; returns [r, nHead·hd]. The mask is an array,
 * not an input: nothing flows back to it.
 */
export function attention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, mask: Float32Array, scale: number): tf.Tensor2D {
  const [r, nHead, hd] = q.shape;
  const [m, nHeadKv] = k.shape;
  const group = nHead / nHeadKv;
  const op = tf.customGrad((...args: GradArgs) => {
    const [qi, ki, vi, save] = args as [tf.Tensor3D, tf.Tensor3D, tf.Tensor3D, tf.GradSaveFunc];
    const maskT = tf.tensor2d(mask, [r, m]);
    const qs = headsOf(tf.mul(qi, scale) as tf.Tensor3D, nHeadKv);
    const kT = tf.unstack(tf.transpose(ki, [1, 2, 0])) as tf.Tensor2D[]; // per KV head [hd, m]
    const vh = tf.unstack(tf.transpose(vi, [1, 0, 2])) as tf.Tensor2D[]; // per KV head [m, hd]
    const probs: tf.Tensor2D[] = [];
    const outs = qs.map((qh, h) => {
      const scores = tf.add(tf.reshape(tf.matMul(qh, kT[h] as tf.Tensor2D), [group, r, m]), maskT);
      const p = tf.reshape(tf.softmax(scores, -1), [group * r, m]) as tf.Tensor2D;
      probs.push(p);
      return tf.matMul(p, vh[h] as tf.Tensor2D) as tf.Tensor2D;
    });
    save([qi, ki, vi, ...probs, ...outs]);
    return {
      value: mergeHeads(outs, r, nHead, hd),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [qsv, ksv, vsv, ...rest] = saved as [tf.Tensor3D, tf.Tensor3D, tf.Tensor3D, ...tf.Tensor2D[]];
        const p = rest.slice(0, nHeadKv);
        const o = rest.slice(nHeadKv);
        const dO = headsOf(tf.reshape(dy, [r, nHead, hd]) as tf.Tensor3D, nHeadKv);
        const qh = headsOf(tf.mul(qsv, scale) as tf.Tensor3D, nHeadKv);
        const kh = tf.unstack(tf.transpose(ksv, [1, 0, 2])) as tf.Tensor2D[]; // [m, hd]
        const vT = tf.unstack(tf.transpose(vsv, [1, 2, 0])) as tf.Tensor2D[]; // [hd, m]
        const dq: tf.Tensor2D[] = [];
        const dkT: tf.Tensor2D[] = [];
        const dvT: tf.Tensor2D[] = [];
        dO.forEach((dOh, h) => {
          const ph = p[h] as tf.Tensor2D;
          const dP = tf.matMul(dOh, vT[h] as tf.Tensor2D);
          const dS = tf.mul(ph, tf.sub(dP, tf.sum(tf.mul(dOh, o[h] as tf.Tensor2D), -1, true))) as tf.Tensor2D;
          dq.push(tf.mul(tf.matMul(dS, kh[h] as tf.Tensor2D), scale) as tf.Tensor2D);
          dkT.push(tf.matMul(tf.transpose(qh[h] as tf.Tensor2D), dS)); // scale is in qh
          dvT.push(tf.matMul(tf.transpose(dOh), ph));
        });
        // dKᵀ and dVᵀ are [nHeadKv, hd, m]: back to [m, nHeadKv, hd].
        return [tf.reshape(mergeHeads(dq, r, nHead, hd), [r, nHead, hd]), tf.transpose(tf.stack(dkT), [2, 0, 1]), tf.transpose(tf.stack(dvT), [2, 0, 1])];
      },
    };
  });
  return op(q, k, v) as tf.Tensor2D;
}

/**
 * Per-KV-head query-side blocks [n·group, hd] of x [n, nHead, hd], rows ordered (node, head in group), so the
 * rows of nodes start..end−1 are the contiguous range [start·group, end·group).
 */
function nodeMajorHeads(x: tf.Tensor, n: number, nHeadKv: number, group: number, hd: number): tf.Tensor2D[] {
  return tf.unstack(tf.reshape(tf.transpose(tf.reshape(x, [n, nHeadKv, group, hd]), [1, 0, 2, 3]), [nHeadKv, n * group, hd])) as tf.Tensor2D[];
}

/** Inverse of {@link nodeMajorHeads}: per-KV-head [n·group, hd] blocks back to [n, nHead, hd]. */
function mergeNodeMajor(parts: tf.Tensor2D[], n: number, nHead: number, hd: number): tf.Tensor3D {
  const nHeadKv = parts.length;
  return tf.reshape(tf.transpose(tf.reshape(tf.stack(parts), [nHeadKv, n, nHead / nHeadKv, hd]), [1, 0, 2, 3]), [n, nHead, hd]);
}

/** Sum per-chain key gradients [nHeadKv, hd, m_s] (keys `idx[s]`) into [n, nHeadKv, hd]; shared ancestors add up. */
function scatterKeys(parts: tf.Tensor3D[], idx: Int32Array, n: number, nHeadKv: number, hd: number): tf.Tensor3D {
  const updates = tf.transpose(tf.concat(parts, 2), [2, 0, 1]);
  return tf.scatterND(tf.tensor2d(idx, [idx.length, 1], "int32"), updates, [n, nHeadKv, hd]);
}

/** Maximal runs [start, length] of consecutive indices in `keys` (a chain's keys: a few runs of ancestors, then itself). */
function runsOf(keys: Int32Array): [number, number][] {
  const runs: [number, number][] = [];
  for (let i = 0; i < keys.length; i++) {
    const last = runs[runs.length - 1];
    const key = keys[i] as number;
    if (last && last[0] + last[1] === key) last[1]++;
    else runs.push([key, 1]);
  }
  return runs;
}

/**
 * Rows `runs` of x [n, …] as contiguous slices, concatenated: a chain's keys are a handful of runs, and the wasm
 * back-end's GatherV2 took most of a tree step's attention time (~5 ms per gather of a few hundred rows).
 */
function rowsOf(x: tf.Tensor3D, runs: readonly [number, number][]): tf.Tensor3D {
  const [, a, b] = x.shape;
  const parts = runs.map(([start, len]) => tf.slice(x, [start, 0, 0], [len, a, b]));
  return parts.length === 1 ? (parts[0] as tf.Tensor3D) : tf.concat(parts, 0);
}

/**
 * Tree attention over a packed prefix tree as one differentiable op: queries q [n, nHead, hd] and keys and
 * values [n, nHeadKv, hd] of all n nodes; `segments` are the tree's maximal chains in node order covering
 * 0..n−1 (attention-mask.ts `treeSegments`), each attending its own keys (ancestors, then its chain causally)
 * under its own mask. Returns [n, nHead·hd], equal to {@link attention} run per chain and concatenated, with
 * one op's overhead instead of one per chain. Segments are arrays, not inputs: nothing flows back to them.
 */
export function treeAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, segments: readonly SegmentAttention[], scale: number): tf.Tensor2D {
  const [n, nHead, hd] = q.shape;
  const nHeadKv = k.shape[1];
  const group = nHead / nHeadKv;
  let covered = 0;
  for (const s of segments) {
    if (s.start !== covered || s.end <= s.start) throw new ArborError(`trainer: tree attention segment [${s.start}, ${s.end}) does not continue at node ${covered}`, "trainer");
    if (s.mask.length !== (s.end - s.start) * s.keys.length) throw new ArborError(`trainer: tree attention segment [${s.start}, ${s.end}) has a mask of ${s.mask.length} entries for ${s.keys.length} keys`, "trainer");
    covered = s.end;
  }
  if (covered !== n) throw new ArborError(`trainer: tree attention segments cover ${covered} of ${n} nodes`, "trainer");
  const allKeys = new Int32Array(segments.reduce((a, s) => a + s.keys.length, 0));
  segments.reduce((off, s) => (allKeys.set(s.keys, off), off + s.keys.length), 0);
  const runs = segments.map((s) => runsOf(s.keys));
  const op = tf.customGrad((...args: GradArgs) => {
    const [qi, ki, vi, save] = args as [tf.Tensor3D, tf.Tensor3D, tf.Tensor3D, tf.GradSaveFunc];
    const qh = nodeMajorHeads(tf.mul(qi, scale), n, nHeadKv, group, hd);
    const outs: tf.Tensor2D[][] = Array.from({ length: nHeadKv }, () => []);
    const probs: tf.Tensor2D[] = []; // segment-major: probs[s·nHeadKv + h]
    segments.forEach((s, si) => {
      const len = s.end - s.start;
      const m = s.keys.length;
      const r = runs[si] as [number, number][];
      const kT = tf.unstack(tf.transpose(rowsOf(ki, r), [1, 2, 0])) as tf.Tensor2D[]; // per KV head [hd, m]
      const vs = tf.unstack(tf.transpose(rowsOf(vi, r), [1, 0, 2])) as tf.Tensor2D[]; // per KV head [m, hd]
      const maskT = tf.tensor3d(s.mask, [len, 1, m]);
      for (let h = 0; h < nHeadKv; h++) {
        const qs = tf.slice(qh[h] as tf.Tensor2D, [s.start * group, 0], [len * group, hd]);
        const scores = tf.add(tf.reshape(tf.matMul(qs, kT[h] as tf.Tensor2D), [len, group, m]), maskT);
        const p = tf.reshape(tf.softmax(scores, -1), [len * group, m]) as tf.Tensor2D;
        probs.push(p);
        (outs[h] as tf.Tensor2D[]).push(tf.matMul(p, vs[h] as tf.Tensor2D));
      }
    });
    const o = outs.map((parts) => (parts.length === 1 ? (parts[0] as tf.Tensor2D) : tf.concat(parts, 0)));
    save([qi, ki, vi, ...o, ...probs]);
    return {
      value: tf.reshape(mergeNodeMajor(o, n, nHead, hd), [n, nHead * hd]),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [qsv, ksv, vsv, ...rest] = saved as [tf.Tensor3D, tf.Tensor3D, tf.Tensor3D, ...tf.Tensor2D[]];
        const oh = rest.slice(0, nHeadKv);
        const p = rest.slice(nHeadKv);
        const dO = nodeMajorHeads(dy, n, nHeadKv, group, hd);
        const qsh = nodeMajorHeads(tf.mul(qsv, scale), n, nHeadKv, group, hd);
        // FlashAttention's D for every row at once, [n·group, 1] per head.
        const dRow = dO.map((d, h) => tf.sum(tf.mul(d, oh[h] as tf.Tensor2D), -1, true));
        const dq: tf.Tensor2D[][] = Array.from({ length: nHeadKv }, () => []);
        const dkT: tf.Tensor3D[] = [];
        const dvT: tf.Tensor3D[] = [];
        segments.forEach((s, si) => {
          const len = s.end - s.start;
          const r = runs[si] as [number, number][];
          const ks = tf.unstack(tf.transpose(rowsOf(ksv, r), [1, 0, 2])) as tf.Tensor2D[]; // [m, hd]
          const vT = tf.unstack(tf.transpose(rowsOf(vsv, r), [1, 2, 0])) as tf.Tensor2D[]; // [hd, m]
          const dkS: tf.Tensor2D[] = [];
          const dvS: tf.Tensor2D[] = [];
          for (let h = 0; h < nHeadKv; h++) {
            const rows = (x: tf.Tensor2D, w: number) => tf.slice(x, [s.start * group, 0], [len * group, w]);
            const dOs = rows(dO[h] as tf.Tensor2D, hd);
            const ph = p[si * nHeadKv + h] as tf.Tensor2D;
            const dP = tf.matMul(dOs, vT[h] as tf.Tensor2D);
            const dS = tf.mul(ph, tf.sub(dP, rows(dRow[h] as tf.Tensor2D, 1))) as tf.Tensor2D;
            (dq[h] as tf.Tensor2D[]).push(tf.matMul(dS, ks[h] as tf.Tensor2D));
            dkS.push(tf.matMul(tf.transpose(rows(qsh[h] as tf.Tensor2D, hd)), dS)); // scale is in qsh
            dvS.push(tf.matMul(tf.transpose(dOs), ph));
          }
          dkT.push(tf.stack(dkS) as tf.Tensor3D);
          dvT.push(tf.stack(dvS) as tf.Tensor3D);
        });
        const dqh = dq.map((parts) => (parts.length === 1 ? (parts[0] as tf.Tensor2D) : tf.concat(parts, 0)));
        return [tf.mul(mergeNodeMajor(dqh, n, nHead, hd), scale), scatterKeys(dkT, allKeys, n, nHeadKv, hd), scatterKeys(dvT, allKeys, n, nHeadKv, hd)];
      },
    };
  });
  return op(q, k, v) as tf.Tensor2D;
}
