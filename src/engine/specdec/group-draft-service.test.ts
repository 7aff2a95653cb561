import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { GroupDraftService } from "./group-draft-service.js";
import { GroupReplica } from "./group-replica.js";

function service(over: Partial<ConstructorParameters<typeof GroupDraftService>[0]> = {}) {
  const clock = new VirtualClock(1000);
  return { clock, svc: new GroupDraftService({ clock, maxDepth: 8, ...over }) };
}

describe("GroupDraftService", () => {
  it("drafts for one request from its siblings' tokens", () => {
    const { svc } = service();
    svc.registerGroup("g", 60_000);
    svc.update("g", "sib", 0, [1, 2, 3, 4, 5, 6]);
    svc.update("g", "me", 0, [1, 2]);
    const d = svc.draft({ groupId: "g", context: [9, 1, 2] });
    // "1 2" occurs twice (sib, me); only sib continues it: 3 at 1/2, then 4 at 1/2.
    expect(d).toEqual({ tokens: [3, 4], parents: [-1, 0], probs: [0.5, 0.5], score: 1, matchLen: 2 });
  });

  it("update is idempotent for a repeated prevLen and appends only the new tail of an overlap", () => {
    const { svc } = service();
    svc.registerGroup("g", 60_000);
    expect(svc.update("g", "r", 0, [1, 2, 3])).toEqual({ length: 3, appended: 3, evicted: [] });
    const cursor = svc.cursor;
    expect(svc.update("g", "r", 0, [1, 2, 3])).toEqual({ length: 3, appended: 0, evicted: [] });
    expect(svc.cursor).toBe(cursor);
    expect(svc.update("g", "r", 2, [3, 4])).toEqual({ length: 4, appended: 1, evicted: [] });
    expect(svc.sequences("g").get("r")).toEqual([1, 2, 3, 4]);
  });

  it("refuses a gap, naming prevLen, and a rewrite of recorded tokens", () => {
    const { svc } = service();
    svc.registerGroup("g", 60_000);
    svc.update("g", "r", 0, [1, 2]);
    expect(() => svc.update("g", "r", 5, [7])).toThrow(
      "prevLen: 5 is past the end of request 'r' in group 'g', which holds 2 tokens: tokens 2..4 were never sent",
    );
    expect(() => svc.update("g", "r", 1, [9])).toThrow(/^newTokens\[0\]: token 9 differs from token 2 already recorded at position 1/);
    expect(() => svc.update("g", "r", -1, [9])).toThrow("prevLen: must be an integer >= 0, got -1");
    expect(() => svc.update("g", "r", 2, [0.5])).toThrow("newTokens[0]: must be a token id");
    expect(() => svc.update("nope", "r", 0, [1])).toThrow("groupId: no group 'nope' (never registered, expired or evicted): register it first");
    expect(svc.sequences("g").get("r")).toEqual([1, 2]);
  });

  it("fetch returns only what was added since the cursor", () => {
    const { svc } = service();
    svc.registerGroup("g", 60_000);
    svc.registerGroup("h", 60_000);
    svc.update("g", "a", 0, [1, 2]);
    const first = svc.fetch(["g", "h", "zz"], 0);
    expect(first.missing).toEqual(["zz"]);
    expect(first.groups.map((g) => [g.groupId, g.sequences])).toEqual([
      ["g", [{ requestId: "a", start: 0, tokens: [1, 2] }]],
      ["h", []],
    ]);
    svc.update("g", "a", 2, [3]);
    svc.update("g", "b", 0, [7]);
    svc.update("h", "c", 0, [8, 8]);
    const second = svc.fetch(["g", "h"], first.cursor);
    expect(second.groups.map((g) => [g.groupId, g.sequences])).toEqual([
      ["g", [{ requestId: "a", start: 2, tokens: [3] }, { requestId: "b", start: 0, tokens: [7] }]],
      ["h", [{ requestId: "c", start: 0, tokens: [8, 8] }]],
    ]);
    expect(svc.fetch(["g", "h"], second.cursor).groups.flatMap((g) => g.sequences)).toEqual([]);
    expect(() => svc.fetch(["g"], second.cursor + 1)).toThrow(/^since: cursor \d+ is ahead of the service's \d+/);
  });

  it("groups expire ttlMs after their last registration or update, on the injected clock", () => {
    const { clock, svc } = service();
    expect(svc.registerGroup("g", 1000)).toEqual({ groupId: "g", expiresAt: 2000 });
    clock.advance(900);
    svc.update("g", "r", 0, [1]);
    clock.advance(900);
    // Updated at 1900: alive until 2900.
    expect(svc.groupIds()).toEqual(["g"]);
    clock.advance(100);
    expect(svc.groupIds()).toEqual([]);
    expect(svc.fetch(["g"], 0).missing).toEqual(["g"]);
    expect(() => svc.draft({ groupId: "g", context: [1] })).toThrow(/no group 'g'/);
    expect(() => svc.registerGroup("g", 0)).toThrow("ttlMs: must be an integer >= 1, got 0");
  });

  it("evicts the least recently used group at maxGroups", () => {
    const { svc } = service({ maxGroups: 2 });
    svc.registerGroup("a", 60_000);
    svc.registerGroup("b", 60_000);
    svc.update("a", "r", 0, [1]);
    expect(svc.registerGroup("c", 60_000)).toMatchObject({ evictedGroup: "b" });
    expect(svc.groupIds()).toEqual(["a", "c"]);
  });

  it("evicts the least recently used other groups when the tokens over all groups pass maxTokens", () => {
    const { svc } = service({ maxTokensPerGroup: 4, maxTokens: 6 });
    for (const g of ["a", "b", "c"]) svc.registerGroup(g, 60_000);
    svc.update("a", "r", 0, [1, 2]);
    svc.update("b", "r", 0, [1, 2]);
    svc.update("c", "r", 0, [1]);
    svc.draft({ groupId: "a", context: [1] }); // a is now more recent than b
    expect(svc.tokenCount).toBe(5);
    svc.update("c", "r", 1, [2, 3]);
    // 7 > 6: b (least recently used) goes; a and c stay.
    expect(svc.groupIds()).toEqual(["a", "c"]);
    expect(svc.tokenCount).toBe(5);
    expect(svc.fetch(["b"], 0).missing).toEqual(["b"]);
    // Within one group the group's own budget evicts its oldest sequence first.
    svc.update("c", "s", 0, [4, 4]);
    expect([...svc.sequences("c").keys()]).toEqual(["s"]);
    expect(svc.tokenCount).toBe(4);
    expect(() => service({ maxTokensPerGroup: 8, maxTokens: 4 })).toThrow("maxTokens: must be at least maxTokensPerGroup (8), got 4");
  });

  it("evicts a group's oldest sequence at maxSequencesPerGroup and accepts (drops) its later updates", () => {
    const { svc } = service({ maxSequencesPerGroup: 2 });
    svc.registerGroup("g", 60_000);
    svc.update("g", "a", 0, [1, 2]);
    svc.update("g", "b", 0, [3]);
    const cursor = svc.fetch(["g"], 0).cursor;
    expect(svc.update("g", "c", 0, [4])).toEqual({ length: 1, appended: 1, evicted: ["a"] });
    expect([...svc.sequences("g").keys()]).toEqual(["b", "c"]);
    // a's engine keeps sending: accepted, not stored; a gap is still a gap.
    expect(svc.update("g", "a", 2, [5])).toEqual({ length: 3, appended: 0, evicted: [] });
    expect(() => svc.update("g", "a", 9, [5])).toThrow(/prevLen: 9 is past the end of request 'a'/);
    const delta = svc.fetch(["g"], cursor).groups[0];
    expect(delta?.evicted).toEqual(["a"]);
    expect(delta?.sequences).toEqual([{ requestId: "c", start: 0, tokens: [4] }]);
  });

  it("evicts the oldest sequences at maxTokensPerGroup and refuses one sequence over it", () => {
    const { svc } = service({ maxTokensPerGroup: 5 });
    svc.registerGroup("g", 60_000);
    svc.update("g", "a", 0, [1, 2, 3]);
    expect(svc.update("g", "b", 0, [4, 5, 6])).toEqual({ length: 3, appended: 3, evicted: ["a"] });
    expect(() => svc.update("g", "b", 3, [7, 8, 9])).toThrow(
      "newTokens: request 'b' in group 'g' would hold 6 tokens, over the group's budget of 5 (maxTokensPerGroup)",
    );
    expect(svc.sequences("g").get("b")).toEqual([4, 5, 6]);
  });

  it("a replica kept up with fetch drafts as the service does and starts over for a re-registered group", async () => {
    const { clock, svc } = service();
    const replica = new GroupReplica(svc, { maxDepth: 8 });
    svc.registerGroup("g", 1000);
    svc.update("g", "a", 0, [1, 2, 3, 4]);
    await replica.sync(["g"]);
    svc.update("g", "a", 4, [1, 2, 5]);
    svc.update("g", "b", 0, [1, 2, 3]);
    await replica.sync(["g"]);
    expect(replica.sequences("g")).toEqual(svc.sequences("g"));
    expect(replica.draft("g", [1, 2], { topK: 2 })).toEqual(svc.draft({ groupId: "g", context: [1, 2], topK: 2 }));
    clock.advance(1000);
    svc.registerGroup("g", 1000);
    svc.update("g", "z", 0, [9]);
    await replica.sync(["g"]);
    expect(replica.sequences("g")).toEqual(new Map([["z", [9]]]));
    clock.advance(1000);
    await replica.sync(["g"]);
    expect(replica.groupIds()).toEqual([]);
  });
});
