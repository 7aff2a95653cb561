// Seer's observation on synthetic group data: the responses to one prompt share long spans, so a request
// drafting from its group's tree (its finished siblings' tokens and its own) gets more drafted-and-correct
// tokens per step than drafting from its own tokens alone, and more as the finished siblings grow in
// number. Responses: mutated copies of one base sequence (a token replaced, inserted or dropped here and
// there). Each step drafts from the context so far, accepts the longest drafted path that the true
// response continues (greedy verification), then moves past the accepted tokens plus the target's own.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { Rng } from "../../core/rng.js";
import { GroupDraftService } from "./group-draft-service.js";
import { draftFromTrie, type Draft } from "./suffix-draft.js";
import { SuffixTrie } from "./suffix-trie.js";

const VOCAB = 200;

function mutate(base: readonly number[], rng: Rng, rate: number): number[] {
  const out: number[] = [];
  for (const t of base) {
    const u = rng.float();
    if (u < rate / 3) continue; // dropped
    if (u < (2 * rate) / 3) out.push(rng.int(0, VOCAB - 1)); // replaced
    else out.push(t);
    if (rng.float() < rate / 3) out.push(rng.int(0, VOCAB - 1)); // inserted
  }
  return out;
}

/** Draft tokens the target continues: the longest path of the draft tree that matches target[pos..]. */
function accepted(d: Draft, target: readonly number[], pos: number): number {
  let parent = -1;
  let n = 0;
  for (;;) {
    const next = d.tokens.findIndex((t, i) => d.parents[i] === parent && t === target[pos + n]);
    if (next < 0) return n;
    parent = next;
    n++;
  }
}

/** Mean accepted draft tokens per decoding step of `target`, drafting with `draft(context)` and feeding each step's tokens with `feed`. */
function acceptance(target: readonly number[], draft: (context: readonly number[]) => Draft, feed: (from: number, tokens: number[]) => void): number {
  let pos = 0;
  let steps = 0;
  let total = 0;
  while (pos < target.length) {
    const a = accepted(draft(target.slice(0, pos)), target, pos);
    const step = target.slice(pos, Math.min(target.length, pos + a + 1));
    feed(pos, step);
    pos += step.length;
    total += a;
    steps++;
  }
  return total / steps;
}

interface Group {
  siblings: number[][];
  target: number[];
}

function groups(seed: number, count: number, siblings: number): Group[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => {
    const base = Array.from({ length: 300 }, () => rng.int(0, VOCAB - 1));
    return { siblings: Array.from({ length: siblings }, () => mutate(base, rng, 0.08)), target: mutate(base, rng, 0.08) };
  });
}

/** Mean over the groups of the target's acceptance with its own tree only. */
function perRequest(data: Group[], topK: number): number {
  let sum = 0;
  for (const g of data) {
    const own = new SuffixTrie({ maxDepth: 24 });
    sum += acceptance(g.target, (ctx) => draftFromTrie(own, ctx.slice(-24), { topK }), (_from, tokens) => own.append("me", tokens));
  }
  return sum / data.length;
}

/** Mean over the groups of the target's acceptance drafting from the group service with `n` finished siblings. */
function grouped(data: Group[], n: number, topK: number): number {
  let sum = 0;
  for (const [i, g] of data.entries()) {
    const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 24 });
    const id = `group-${i}`;
    svc.registerGroup(id, 60_000);
    g.siblings.slice(0, n).forEach((s, k) => svc.update(id, `sibling-${k}`, 0, s));
    sum += acceptance(g.target, (ctx) => svc.draft({ groupId: id, context: ctx, topK }), (from, tokens) => svc.update(id, "me", from, tokens));
  }
  return sum / data.length;
}

describe("drafting from siblings (group tree) vs the request's own tree", () => {
  const data = groups(2026, 4, 15);

  it("the group tree accepts more tokens per step than the per-request tree, more with more siblings", () => {
    const own = perRequest(data, 4);
    // Measured here: own tree 0.003 accepted tokens per step; group tree with 0, 1, 4, 15 finished
    // siblings 0.003, 1.38, 2.31, 2.63 (Seer reports 1.70 → 2.85 on real groups, counting the bonus token).
    const bySiblings = [0, 1, 4, 15].map((n) => grouped(data, n, 4));
    // No sibling: the group tree holds exactly the request's own tokens.
    expect(bySiblings[0]).toBeCloseTo(own, 10);
    // Mutated random text rarely repeats itself: the own tree drafts almost nothing right.
    expect(own).toBeLessThan(0.2);
    expect(bySiblings[1]).toBeGreaterThan(own + 1);
    expect(bySiblings[2]).toBeGreaterThan(bySiblings[1] as number);
    expect(bySiblings[3]).toBeGreaterThan(bySiblings[2] as number);
  });
});
