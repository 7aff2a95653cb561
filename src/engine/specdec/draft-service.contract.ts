// The contract every DraftService implementation passes: run for the in-process service and for the
// HTTP client against the routes on a loopback server (draft-service-http.test.ts).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { VirtualClock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import type { DraftService } from "./draft-service.js";

export interface DraftServiceFixture {
  service: DraftService;
  /** The clock the service's groups expire on. */
  clock: VirtualClock;
  close(): Promise<void>;
}

/** The ArborError a call fails with (thrown at once by the in-process service, rejected by the client). */
async function failure(call: () => unknown): Promise<ArborError> {
  try {
    await call();
  } catch (e) {
    expect(e).toBeInstanceOf(ArborError);
    return e as ArborError;
  }
  throw new Error("expected the call to fail");
}

/** Run the contract against fixtures made by `make` (a service with maxDepth 8, maxSequencesPerGroup 2). */
export function draftServiceContract(name: string, make: () => Promise<DraftServiceFixture>): void {
  describe(`DraftService contract: ${name}`, () => {
    let f: DraftServiceFixture;
    beforeEach(async () => {
      f = await make();
    });
    afterEach(async () => {
      await f.close();
    });

    it("drafts for a request from its group's sequences, single path and tree", async () => {
      const s = f.service;
      await s.registerGroup("g", 60_000);
      await s.update("g", "a", 0, [1, 2, 3, 4]);
      await s.update("g", "b", 0, [1, 2, 5]);
      expect(await s.draft({ groupId: "g", context: [7, 1, 2], topK: 1 })).toEqual({ tokens: [3, 4], parents: [-1, 0], probs: [0.5, 0.5], score: 1, matchLen: 2 });
      const tree = await s.draft({ groupId: "g", context: [7, 1, 2], topK: Infinity, maxSpecFactor: 2 });
      expect(tree.tokens).toEqual([3, 5, 4]);
      expect(tree.parents).toEqual([-1, -1, 0]);
    });

    it("update: a repeat changes nothing, a gap and a rewrite are refused naming the field", async () => {
      const s = f.service;
      await s.registerGroup("g", 60_000);
      expect(await s.update("g", "a", 0, [1, 2])).toEqual({ length: 2, appended: 2, evicted: [] });
      expect(await s.update("g", "a", 0, [1, 2])).toEqual({ length: 2, appended: 0, evicted: [] });
      const gap = await failure(() => s.update("g", "a", 4, [3]));
      expect(gap.code).toBe("gap");
      expect(gap.message).toMatch(/^prev_?len: 4 is past the end of request 'a' in group 'g', which holds 2 tokens/i);
      const conflict = await failure(() => s.update("g", "a", 1, [9]));
      expect(conflict.code).toBe("conflict");
      expect(conflict.message).toMatch(/^new_?tokens\[0\]: token 9 differs/i);
      expect((await failure(() => s.update("zz", "a", 0, [1]))).code).toBe("not_found");
      expect((await failure(() => s.draft({ groupId: "zz", context: [1] }))).code).toBe("not_found");
    });

    it("fetch returns what was added after the cursor, and evictions", async () => {
      const s = f.service;
      await s.registerGroup("g", 60_000);
      await s.update("g", "a", 0, [1, 2]);
      const first = await s.fetch(["g", "missing"], 0);
      expect(first.missing).toEqual(["missing"]);
      expect(first.groups[0]?.sequences).toEqual([{ requestId: "a", start: 0, tokens: [1, 2] }]);
      await s.update("g", "a", 2, [3]);
      await s.update("g", "b", 0, [4]);
      // A third sequence evicts the oldest (maxSequencesPerGroup 2).
      expect((await s.update("g", "c", 0, [5])).evicted).toEqual(["a"]);
      const second = await s.fetch(["g"], first.cursor);
      expect(second.groups[0]?.sequences).toEqual([
        { requestId: "b", start: 0, tokens: [4] },
        { requestId: "c", start: 0, tokens: [5] },
      ]);
      expect(second.groups[0]?.evicted).toEqual(["a"]);
      expect((await s.fetch(["g"], second.cursor)).groups[0]).toMatchObject({ sequences: [], evicted: [] });
    });

    it("groups expire by TTL on the service's clock", async () => {
      const s = f.service;
      await s.registerGroup("g", 500);
      f.clock.advance(499);
      await s.update("g", "a", 0, [1]);
      f.clock.advance(499);
      expect((await s.fetch(["g"], 0)).missing).toEqual([]);
      f.clock.advance(1);
      expect((await s.fetch(["g"], 0)).missing).toEqual(["g"]);
      expect((await failure(() => s.registerGroup("g", 0))).message).toMatch(/^ttl_?ms: must be an integer >= /i);
    });
  });
}
