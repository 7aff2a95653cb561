import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import type { DraftService } from "./draft-service.js";
import { GroupDraftService } from "./group-draft-service.js";
import { SharedGroupDrafts } from "./shared-group-drafts.js";

const TTL = 60_000;

/** The in-process service, with a switch that makes every call fail as an unreachable server does. */
function flaky(svc: DraftService): { service: DraftService; down: { on: boolean }; calls: { n: number } } {
  const down = { on: false };
  const calls = { n: 0 };
  const guard = <T>(fn: () => T): T => {
    calls.n++;
    if (down.on) throw new ArborError("draft service: cannot reach http://x/v1/specdec/update: ECONNREFUSED", "draft_service_unreachable");
    return fn();
  };
  return {
    down,
    calls,
    service: {
      registerGroup: (g, ttl) => guard(() => svc.registerGroup(g, ttl)),
      update: (g, r, p, t) => guard(() => svc.update(g, r, p, t)),
      fetch: (g, s) => guard(() => svc.fetch(g, s)),
      draft: (req) => guard(() => svc.draft(req)),
    },
  };
}

describe("SharedGroupDrafts (an engine's side of a shared draft service)", () => {
  it("one engine's request drafts from a sibling's tokens sent by another engine", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 8 });
    const a = new SharedGroupDrafts(svc, { ttlMs: TTL });
    const b = new SharedGroupDrafts(svc, { ttlMs: TTL });
    // The group is new to the service: engine A registers it on its first update.
    expect(await a.step([{ requestId: "r0", groupId: "g", output: [5, 6, 7, 8, 9] }], [])).toBe(true);
    expect(await b.step([{ requestId: "r1", groupId: "g", output: [5, 6] }], ["g"])).toBe(true);
    expect(b.draft("g", [1, 5, 6], { maxSpecTokens: 8 })?.tokens).toEqual([7, 8]);
    // A's later tokens reach B's copy at B's next step (only what was added since B's cursor travels).
    await a.step([{ requestId: "r0", groupId: "g", output: [5, 6, 7, 8, 9, 10, 11] }], []);
    await b.step([{ requestId: "r1", groupId: "g", output: [5, 6, 7] }], ["g"]);
    expect(b.draft("g", [5, 6, 7], { maxSpecTokens: 8 })?.tokens).toEqual([8, 9, 10]);
    expect(svc.sequences("g")).toEqual(new Map([["r0", [5, 6, 7, 8, 9, 10, 11]], ["r1", [5, 6, 7]]]));
    expect(b.stats()).toEqual({ syncedSteps: 2, localSteps: 0, failures: 0 });
  });

  it("a failed step reports false and counts it; later steps skip the service (doubling, bounded), then catch up", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 8 });
    const f = flaky(svc);
    const e = new SharedGroupDrafts(f.service, { ttlMs: TTL, minBackoffSteps: 1, maxBackoffSteps: 2 });
    f.down.on = true;
    const out = (n: number) => [{ requestId: "r", groupId: "g", output: Array.from({ length: n }, (_, i) => i + 1) }];
    const results: boolean[] = [];
    for (let n = 1; n <= 8; n++) results.push(await e.step(out(n), ["g"]));
    // Fail, skip 1, fail, skip 2, fail, skip 2, fail: every step drafts locally, never throws.
    expect(results.every((x) => !x)).toBe(true);
    expect(e.stats()).toEqual({ syncedSteps: 0, localSteps: 8, failures: 3 });
    // Skipped steps make no call at all (an unreachable service costs a few timeouts, not one per step).
    expect(f.calls.n).toBe(3);
    f.down.on = false;
    // The service is back: the next step sends the whole output and syncs.
    expect(await e.step(out(9), ["g"])).toBe(true);
    expect(svc.sequences("g").get("r")).toEqual(out(9)[0]?.output);
    expect(e.draft("g", [1, 2, 3], { maxSpecTokens: 2 })?.tokens).toEqual([4, 5]);
    expect(e.stats()).toEqual({ syncedSteps: 1, localSteps: 8, failures: 3 });
  });

  it("a refused request (over the group's budget) stops being sent; the step still syncs", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 8, maxTokensPerGroup: 4 });
    const e = new SharedGroupDrafts(svc, { ttlMs: TTL });
    expect(await e.step([{ requestId: "big", groupId: "g", output: [1, 2, 3, 4, 5, 6] }], ["g"])).toBe(true);
    expect(await e.step([{ requestId: "big", groupId: "g", output: [1, 2, 3, 4, 5, 6, 7] }], ["g"])).toBe(true);
    expect(e.stats().failures).toBe(1);
  });

  it("keeps a group's copy only while a request of the group is registered", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock(), maxDepth: 8 });
    const e = new SharedGroupDrafts(svc, { ttlMs: TTL });
    await e.step(
      [
        { requestId: "r1", groupId: "g1", output: [1, 2] },
        { requestId: "r2", groupId: "g1", output: [1, 3] },
        { requestId: "r3", groupId: "g2", output: [4] },
      ],
      ["g1", "g2"],
    );
    expect(e.copiedGroups().sort()).toEqual(["g1", "g2"]);
    e.forget("r1", new Set(["g1", "g2"]));
    expect(e.copiedGroups().sort()).toEqual(["g1", "g2"]);
    e.forget("r3", new Set(["g1"]));
    expect(e.copiedGroups()).toEqual(["g1"]);
    // Not copied: no draft from the service (the engine drafts from its own trees).
    expect(e.draft("g2", [4], {})).toBeUndefined();
    expect(e.draft("g1", [1], {})?.tokens.length).toBeGreaterThan(0);
  });

  it("a step without grouped requests calls nothing and counts nothing", async () => {
    const svc = new GroupDraftService({ clock: new VirtualClock() });
    const f = flaky(svc);
    const e = new SharedGroupDrafts(f.service, { ttlMs: TTL });
    expect(await e.step([], [])).toBe(true);
    expect(f.calls.n).toBe(0);
    expect(e.stats()).toEqual({ syncedSteps: 0, localSteps: 0, failures: 0 });
  });

  it("refuses bad backoff bounds, naming the field", () => {
    const svc = new GroupDraftService({ clock: new VirtualClock() });
    expect(() => new SharedGroupDrafts(svc, { ttlMs: TTL, minBackoffSteps: -1 })).toThrow(/minBackoffSteps: must be an integer >= 0/);
    expect(() => new SharedGroupDrafts(svc, { ttlMs: TTL, minBackoffSteps: 4, maxBackoffSteps: 2 })).toThrow(/maxBackoffSteps: must be an integer >= minBackoffSteps/);
  });
});
