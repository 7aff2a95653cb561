// Property test of the draft service's fetch (fast-check): over random interleavings of updates (some of
// them repeated, as an engine retrying does) and fetches by several callers, each with its own groups
// and cursor, a fetch returns exactly the tokens added to those groups since that caller's last fetch —
// per sequence the right start and tokens, nothing else — and what a caller pieced together from its
// fetches equals the groups' contents. A replica syncing random group sets stays equal to the service.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { SequenceDelta } from "./draft-service.js";
import { GroupDraftService } from "./group-draft-service.js";
import { GroupReplica } from "./group-replica.js";

const GROUPS = ["g0", "g1", "g2"];
const REQUESTS = ["r0", "r1", "r2", "r3"];

type Op =
  | { kind: "update"; g: number; r: number; tokens: number[]; retry: number }
  | { kind: "fetch"; caller: number }
  | { kind: "sync"; groups: boolean[] };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant("update" as const), g: fc.nat(2), r: fc.nat(3), tokens: fc.array(fc.nat(3), { maxLength: 4 }), retry: fc.nat(3) }), weight: 5 },
  { arbitrary: fc.record({ kind: fc.constant("fetch" as const), caller: fc.nat(2) }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant("sync" as const), groups: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }) }), weight: 1 },
);

interface Caller {
  groups: string[];
  cursor: number;
  /** Model time of the last fetch. */
  fetchedAt: number;
  /** What the caller pieced together: group → request → tokens. */
  copy: Map<string, Map<string, number[]>>;
}

describe("GroupDraftService.fetch (property)", () => {
  it("returns exactly what was added since the caller's last fetch", async () => {
    let nonEmptyDeltas = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.subarray(GROUPS, { minLength: 1 }), { minLength: 3, maxLength: 3 }), fc.array(opArb, { maxLength: 60 }), async (callerGroups, ops) => {
        const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 4 });
        for (const g of GROUPS) svc.registerGroup(g, 60_000);
        // Model: per group, per request (in first-update order), each token with the model time it arrived.
        const model = new Map<string, Map<string, { token: number; at: number }[]>>(GROUPS.map((g) => [g, new Map()]));
        const callers: Caller[] = callerGroups.map((groups) => ({ groups, cursor: 0, fetchedAt: -1, copy: new Map(groups.map((g) => [g, new Map()])) }));
        const replica = new GroupReplica(svc, { maxDepth: 4 });
        let time = 0;
        for (const op of ops) {
          time++;
          if (op.kind === "update") {
            const g = GROUPS[op.g] as string;
            const r = REQUESTS[op.r] as string;
            const seqs = model.get(g) as Map<string, { token: number; at: number }[]>;
            const seq = seqs.get(r) ?? [];
            // A retry re-sends the last few tokens already recorded with the new ones.
            const back = Math.min(op.retry, seq.length);
            const prevLen = seq.length - back;
            const sent = [...seq.slice(prevLen).map((t) => t.token), ...op.tokens];
            const res = svc.update(g, r, prevLen, sent);
            expect(res).toEqual({ length: seq.length + op.tokens.length, appended: op.tokens.length, evicted: [] });
            if (op.tokens.length > 0) {
              for (const token of op.tokens) seq.push({ token, at: time });
              seqs.set(r, seq);
            }
          } else if (op.kind === "fetch") {
            const c = callers[op.caller] as Caller;
            const res = svc.fetch(c.groups, c.cursor);
            expect(res.missing).toEqual([]);
            expect(res.groups.map((d) => d.groupId)).toEqual(c.groups);
            for (const delta of res.groups) {
              const expected: SequenceDelta[] = [];
              for (const [requestId, seq] of model.get(delta.groupId) ?? []) {
                const start = seq.findIndex((t) => t.at > c.fetchedAt);
                if (start >= 0) expected.push({ requestId, start, tokens: seq.slice(start).map((t) => t.token) });
              }
              expect(delta.sequences).toEqual(expected);
              expect(delta.evicted).toEqual([]);
              nonEmptyDeltas += expected.length;
              const copy = c.copy.get(delta.groupId) as Map<string, number[]>;
              for (const s of delta.sequences) {
                const held = copy.get(s.requestId) ?? [];
                expect(s.start).toBe(held.length);
                copy.set(s.requestId, [...held, ...s.tokens]);
              }
              const truth = new Map([...(model.get(delta.groupId) ?? [])].map(([id, seq]) => [id, seq.map((t) => t.token)]));
              expect(copy).toEqual(truth);
            }
            c.cursor = res.cursor;
            c.fetchedAt = time;
          } else {
            const groups = GROUPS.filter((_, i) => op.groups[i]);
            await replica.sync(groups);
            for (const g of groups) expect(replica.sequences(g)).toEqual(svc.sequences(g));
          }
        }
      }),
      { numRuns: 300 },
    );
    // The runs did exercise non-empty deltas (the property is not vacuous).
    expect(nonEmptyDeltas).toBeGreaterThan(100);
  });
});
