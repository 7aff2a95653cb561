import { describe, expect, it } from "vitest";
import type { Draft } from "./suffix-draft.js";
import { SuffixDraftCache } from "./suffix-draft-cache.js";

describe("SuffixDraftCache", () => {
  it("drafts from the request's own prompt", () => {
    const cache = new SuffixDraftCache({ maxDepth: 8 });
    cache.startRequest("r", [10, 11, 12, 13, 20, 10, 11]);
    // "10 11" occurs once followed by 12, 13: the context ends in "10 11".
    expect(cache.draft("r", [10, 11]).tokens).toEqual([12, 13]);
  });

  it("drafts from past responses in the global tree, and the higher score wins", () => {
    const cache = new SuffixDraftCache({ maxDepth: 8 });
    cache.startRequest("old", [1]);
    cache.addResponse("old", [5, 6, 7, 8, 9]);
    cache.stopRequest("old");
    cache.startRequest("new", [2, 3]);
    // Only the global tree knows what follows "5 6".
    const d = cache.draft("new", [2, 3, 5, 6]);
    expect(d.tokens).toEqual([7, 8]);
    expect(cache.cachedResponses()).toEqual(["old", "new"]);
    // The request's own tree wins a tie.
    cache.addResponse("new", [5, 6, 4, 4]);
    expect(cache.draft("new", [5, 6]).tokens).toEqual([4, 4]);
  });

  it("a group's draft competes by score, after the request's own on a tie", () => {
    const cache = new SuffixDraftCache({ maxDepth: 8, maxCachedResponses: 0 });
    cache.startRequest("r", [1, 2, 3]);
    const group: Draft = { tokens: [9, 9], parents: [-1, 0], probs: [1, 1], score: 2, matchLen: 2 };
    expect(cache.draft("r", [1, 2], {}, group)).toBe(group);
    expect(cache.draft("r", [1, 2], {}, { ...group, score: 0.5 }).tokens).toEqual([3]);
    expect(cache.cachedResponses()).toEqual([]);
  });

  it("evicts the oldest response at maxCachedResponses and keeps the request's own tree", () => {
    const cache = new SuffixDraftCache({ maxDepth: 8, maxCachedResponses: 2 });
    for (const id of ["a", "b", "c"]) {
      cache.startRequest(id, []);
      cache.addResponse(id, [1, 2, 3]);
      cache.stopRequest(id);
    }
    expect(cache.cachedResponses()).toEqual(["b", "c"]);
    cache.startRequest("b", []);
    // Restarting an id replaces its old response.
    expect(cache.cachedResponses()).toEqual(["c", "b"]);
  });

  it("drops from the global tree a response longer than its budget, and the oldest ones to fit others", () => {
    const cache = new SuffixDraftCache({ maxDepth: 4, maxCachedTokens: 6 });
    cache.startRequest("a", []);
    cache.addResponse("a", [1, 2, 3, 4]);
    cache.startRequest("b", []);
    cache.addResponse("b", [5, 6, 7, 8]);
    expect(cache.cachedResponses()).toEqual(["b"]);
    cache.addResponse("b", [9, 9, 9]);
    expect(cache.cachedResponses()).toEqual([]);
    // The request's own tree still has everything.
    expect(cache.draft("b", [8, 9]).tokens).toEqual([9, 9]);
  });

  it("bounds active requests and names unknown ones", () => {
    const cache = new SuffixDraftCache({ maxActiveRequests: 1 });
    cache.startRequest("a", [1]);
    expect(() => cache.startRequest("a", [1])).toThrow("requestId: request 'a' is already active");
    expect(() => cache.startRequest("b", [1])).toThrow("suffix draft cache (active requests) is full (limit 1)");
    expect(() => cache.addResponse("x", [1])).toThrow("requestId: request 'x' is not active");
    expect(() => cache.draft("x", [1])).toThrow("requestId: request 'x' is not active");
    cache.stopRequest("a");
    expect(() => cache.stopRequest("a")).toThrow("requestId: request 'a' is not active");
    expect(cache.activeRequests()).toEqual([]);
  });
});
