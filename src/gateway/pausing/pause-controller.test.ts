import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { PauseConfig } from "./pause-config.js";
import { PauseController, type PausingBackend } from "./pause-controller.js";

function make(backends: PausingBackend[], config: Partial<PauseConfig> = {}) {
  const clock = new VirtualClock(0);
  const ctl = new PauseController({ clock, backends, config: { bufferPerProgram: 0, decayScope: "off", ...config } });
  return { clock, ctl };
}

describe("PauseController", () => {
  it("takes no action below the thresholds", () => {
    const { ctl, clock } = make([{ name: "A", capacity: 1000 }], { lambdaMax: 0.9, lambdaMin: 0.5 });
    expect(ctl.onCallStart("p1", "A", 300)).toEqual({ kind: "go", backend: "A" });
    expect(ctl.onCallStart("p2", "A", 300)).toEqual({ kind: "go", backend: "A" });
    ctl.onCallEnd("p1", 350);
    clock.advance(5000);
    expect(ctl.tick()).toEqual([]);
    expect(ctl.counters()).toEqual({ pauses: 0, marks: 0, restores: 0, admits: 2, forceResumes: 0 });
    expect(ctl.usage()[0]).toMatchObject({ backend: "A", rawUsage: 650, activePrograms: 2 });
  });

  it("pauses acting programs smallest-first, then marks reasoning ones smallest-first; marked ones pause when their call returns", () => {
    const { ctl } = make([{ name: "A", capacity: 2000 }]);
    for (const [id, t] of [["a1", 100], ["a2", 300], ["r1", 50], ["r2", 400]] as const) ctl.onCallStart(id, "A", t);
    ctl.onCallEnd("a1", 250);
    ctl.onCallEnd("a2", 350);
    // Usage 250 + 350 + 50 + 400 = 1050. Shrink C to 400: pause a1 (→800), a2 (→450), mark r1 (→400).
    ctl.setCapacity("A", 400);
    const actions = ctl.tick();
    expect(actions.map((a) => [a.kind, a.programId, a.backend, a.reason])).toEqual([
      ["pause", "a1", "A", "over-capacity"],
      ["pause", "a2", "A", "over-capacity"],
    ]);
    expect(ctl.get("r1")).toMatchObject({ state: "active", markedForPause: true, phase: "reasoning" });
    expect(ctl.get("r2")).toMatchObject({ state: "active", markedForPause: false });
    expect(ctl.waitingQueue()).toEqual(["a1", "a2"]);
    expect(ctl.usage()[0]?.projectedUsage).toBe(400);
    // A second tick does not mark more: r1's share is already counted as leaving.
    expect(ctl.tick()).toEqual([]);
    expect(ctl.get("r2")?.markedForPause).toBe(false);
    expect(ctl.onCallEnd("r1", 60)).toEqual([
      { kind: "pause", programId: "r1", backend: "A", reason: "marked-call-returned", releasedCalls: 0 },
    ]);
    expect(ctl.get("r1")).toMatchObject({ state: "paused", backend: null, originBackend: "A", markedForPause: false });
    expect(ctl.onCallEnd("r2", 420)).toEqual([]);
    expect(ctl.counters()).toMatchObject({ pauses: 3, marks: 1 });
  });

  it("acting tokens decay by 2^-t, so the same table stops needing a pause as time passes", () => {
    const setup = (decayScope: PauseConfig["decayScope"]) => {
      const { ctl, clock } = make([{ name: "A", capacity: 2000 }], { decayScope });
      ctl.onCallStart("q", "A", 500);
      ctl.onCallStart("p", "A", 800);
      ctl.onCallEnd("p", 800);
      ctl.setCapacity("A", 1000);
      return { ctl, clock };
    };
    const d = setup("usage");
    expect(d.ctl.usage()[0]).toMatchObject({ rawUsage: 1300, decayedUsage: 1300 });
    d.clock.advance(1000);
    expect(d.ctl.usage()[0]).toMatchObject({ rawUsage: 1300, decayedUsage: 900, projectedUsage: 900 });
    d.clock.advance(1000);
    expect(d.ctl.usage()[0]?.decayedUsage).toBe(700);
    expect(d.ctl.tick()).toEqual([]);
    // Without decay the same table at the same time pauses the acting program.
    const o = setup("off");
    o.clock.advance(2000);
    expect(o.ctl.tick().map((a) => a.programId)).toEqual(["p"]);
    // At t=0 the decayed table is still over capacity.
    const z = setup("usage");
    expect(z.ctl.tick().map((a) => a.programId)).toEqual(["p"]);
  });

  it("shares one global waiting queue: a program paused on A is restored on B with its held call", () => {
    const { ctl, clock } = make([
      { name: "A", capacity: 1000 },
      { name: "B", capacity: 1000 },
    ]);
    ctl.onCallStart("p", "A", 600);
    ctl.onCallStart("q", "A", 300);
    ctl.onCallEnd("p", 900);
    ctl.onCallEnd("q", 300);
    clock.advance(5000);
    expect(ctl.tick()).toEqual([{ kind: "pause", programId: "q", backend: "A", reason: "over-capacity", releasedCalls: 0 }]);
    expect(ctl.onCallStart("q", "A", 320)).toEqual({ kind: "wait" });
    expect(ctl.get("q")).toMatchObject({ state: "paused", waitingCalls: 1, phase: "reasoning" });
    clock.advance(5000);
    expect(ctl.tick()).toEqual([{ kind: "restore", programId: "q", backend: "B", reason: "under-capacity", releasedCalls: 1 }]);
    expect(ctl.get("q")).toMatchObject({ state: "active", backend: "B", inFlight: 1, waitingCalls: 0 });
    // Its later calls stay on B whatever the router suggests.
    ctl.onCallEnd("q", 400);
    expect(ctl.onCallStart("q", "A", 400)).toEqual({ kind: "go", backend: "B" });
    expect(ctl.counters()).toMatchObject({ pauses: 1, restores: 1 });
  });

  it("with origin placement, restores a paused program on the backend that paused it once that has room", () => {
    const restoredOn = (placement: PauseConfig["placement"]): string | undefined => {
      const { ctl, clock } = make(
        [
          { name: "A", capacity: 1000 },
          { name: "B", capacity: 2000 },
        ],
        { placement },
      );
      ctl.onCallStart("p", "A", 600);
      ctl.onCallStart("q", "A", 300);
      ctl.onCallEnd("p", 900);
      ctl.onCallEnd("q", 300);
      clock.advance(5000);
      expect(ctl.tick().map((a) => [a.kind, a.programId])).toEqual([["pause", "q"]]);
      expect(ctl.onCallStart("q", "A", 320)).toEqual({ kind: "wait" });
      // p ends: A has room again (1000 free), B more (2000 free).
      ctl.onRelease("p");
      clock.advance(5000);
      const [restore] = ctl.tick();
      expect(restore).toMatchObject({ kind: "restore", programId: "q", reason: "under-capacity", releasedCalls: 1 });
      return restore?.backend;
    };
    expect(restoredOn("origin")).toBe("A");
    expect(restoredOn("most-free")).toBe("B");
  });

  it("places nothing on a backend out of rotation; its programs are paused without a pause action and restored elsewhere at once", () => {
    const { ctl } = make(
      [
        { name: "A", capacity: 1000 },
        { name: "B", capacity: 1000 },
      ],
      { placement: "origin" },
    );
    ctl.onCallStart("idle", "A", 300);
    ctl.onCallEnd("idle", 400);
    ctl.onCallStart("busy", "A", 200);
    ctl.onCallStart("other", "B", 100);
    // The idle program is paused (no engine to pause: no action) with no origin, and restored on B at once.
    const onDown = ctl.setBackendUp("A", false);
    expect(ctl.isUp("A")).toBe(false);
    expect(onDown.map((a) => [a.kind, a.programId, a.backend, a.releasedCalls])).toEqual([["restore", "idle", "B", 0]]);
    expect(ctl.get("idle")).toMatchObject({ state: "active", backend: "B", originBackend: null });
    // The busy one is marked; when its call ends (the gateway aborts it), it is paused and restored on B.
    expect(ctl.get("busy")).toMatchObject({ state: "active", backend: "A", markedForPause: true });
    expect(ctl.onCallAbort("busy").map((a) => [a.kind, a.programId, a.backend])).toEqual([["restore", "busy", "B"]]);
    expect(ctl.counters()).toMatchObject({ pauses: 2, restores: 2 });
    // A new program whose router pick is A goes to B.
    expect(ctl.onCallStart("new", "A", 100)).toEqual({ kind: "go", backend: "B" });
    // Back in rotation, A takes programs again (the router's pick, with room).
    expect(ctl.setBackendUp("A", true)).toEqual([]);
    expect(ctl.onCallStart("later", "A", 100)).toEqual({ kind: "go", backend: "A" });
  });

  it("force-resumes a program whose origin left rotation on the least used backend in rotation", () => {
    const { ctl, clock } = make(
      [
        { name: "A", capacity: 1000 },
        { name: "B", capacity: 1000 },
      ],
      { placement: "origin", forceResumeMs: 10_000, lambdaMin: 0.1 },
    );
    // B is above λmin·C (no restore pass places anything there); A overflows and pauses q.
    ctl.onCallStart("fill", "B", 500);
    ctl.onCallStart("p", "A", 600);
    ctl.onCallStart("q", "A", 300);
    ctl.onCallEnd("p", 900);
    ctl.onCallEnd("q", 300);
    clock.advance(1000);
    expect(ctl.tick().map((a) => [a.kind, a.programId])).toEqual([["pause", "q"]]);
    expect(ctl.get("q")?.originBackend).toBe("A");
    expect(ctl.onCallStart("q", "A", 300)).toEqual({ kind: "wait" });
    ctl.setBackendUp("A", false);
    expect(ctl.get("q")?.originBackend).toBeNull();
    clock.advance(10_000);
    expect(ctl.tick()).toMatchObject([{ kind: "restore", programId: "q", backend: "B", reason: "force-resume", releasedCalls: 1 }]);
  });

  it("with no backend in rotation, lets a new program's call go to the router's pick (it fails at routing) instead of queueing it", () => {
    const { ctl } = make([{ name: "A", capacity: 1000 }]);
    ctl.setBackendUp("A", false);
    expect(ctl.onCallStart("p", "A", 100)).toEqual({ kind: "go", backend: "A" });
    expect(() => ctl.setBackendUp("Z", false)).toThrow(/unknown backend "Z"/);
  });

  it("queues a new program behind a non-empty queue and admits it when room appears", () => {
    const { ctl, clock } = make([{ name: "A", capacity: 1000 }]);
    ctl.onCallStart("big", "A", 900);
    expect(ctl.onCallStart("n1", "A", 200)).toEqual({ kind: "wait" });
    // n2 would fit in A's room but must not overtake n1.
    ctl.setCapacity("A", 1150);
    expect(ctl.onCallStart("n2", "A", 100)).toEqual({ kind: "wait" });
    ctl.onCallEnd("big", 900);
    ctl.onRelease("big");
    clock.advance(5000);
    const actions = ctl.tick();
    expect(actions.map((a) => [a.kind, a.programId, a.backend, a.releasedCalls])).toEqual([
      ["admit", "n1", "A", 1],
      ["admit", "n2", "A", 1],
    ]);
  });

  it("force-resumes a held call after the bound even without room", () => {
    const { ctl, clock } = make([{ name: "A", capacity: 1000 }]);
    expect(ctl.onCallStart("huge", "A", 2000)).toEqual({ kind: "wait" });
    clock.advance(1_799_000);
    expect(ctl.tick()).toEqual([]);
    clock.advance(1000);
    expect(ctl.tick()).toEqual([{ kind: "admit", programId: "huge", backend: "A", reason: "force-resume", releasedCalls: 1 }]);
    expect(ctl.counters().forceResumes).toBe(1);
  });

  it("onRelease drops a queued program and reports its held calls", () => {
    const { ctl } = make([{ name: "A", capacity: 100 }]);
    ctl.onCallStart("x", "A", 500);
    expect(ctl.waitingQueue()).toEqual(["x"]);
    expect(ctl.onRelease("x")).toBe(1);
    expect(ctl.waitingQueue()).toEqual([]);
    expect(ctl.get("x")).toBeUndefined();
    expect(ctl.onCallEnd("x", 10)).toEqual([]);
  });

  it("onHeldCallAbort un-counts a held call; a never-placed program with nothing held is forgotten", () => {
    const { ctl, clock } = make([{ name: "A", capacity: 1000 }]);
    ctl.onCallStart("big", "A", 900);
    expect(ctl.onCallStart("n", "A", 500)).toEqual({ kind: "wait" });
    expect(ctl.onCallStart("n", "A", 500)).toEqual({ kind: "wait" });
    ctl.onHeldCallAbort("n");
    expect(ctl.get("n")).toMatchObject({ waitingCalls: 1, state: "paused" });
    ctl.onHeldCallAbort("n");
    expect(ctl.get("n")).toBeUndefined();
    expect(ctl.waitingQueue()).toEqual([]);
    // A paused program that ran before stays queued, turning acting (restore group "acting").
    ctl.onCallEnd("big", 900);
    ctl.setCapacity("A", 500);
    expect(ctl.tick().map((a) => a.programId)).toEqual(["big"]);
    expect(ctl.onCallStart("big", "A", 950)).toEqual({ kind: "wait" });
    clock.advance(10);
    ctl.onHeldCallAbort("big");
    expect(ctl.get("big")).toMatchObject({ state: "paused", waitingCalls: 0, waitingSince: null, phase: "acting", actingSince: 10 });
    expect(ctl.waitingQueue()).toEqual(["big"]);
    ctl.onHeldCallAbort("big");
    ctl.onHeldCallAbort("nobody");
    expect(ctl.get("big")?.waitingCalls).toBe(0);
  });

  it("ticks through the Clock every intervalMs once started", () => {
    const { ctl, clock } = make([{ name: "A", capacity: 1000 }], { intervalMs: 5000 });
    ctl.onCallStart("p", "A", 900);
    ctl.onCallEnd("p", 900);
    ctl.setCapacity("A", 500);
    const seen: string[] = [];
    ctl.start((as) => seen.push(...as.map((a) => `${a.kind}:${a.programId}`)));
    clock.advance(4999);
    expect(seen).toEqual([]);
    clock.advance(1);
    expect(seen).toEqual(["pause:p"]);
    ctl.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it("rejects bad config and input with the field named", () => {
    const clock = new VirtualClock();
    expect(() => new PauseController({ clock, backends: [{ name: "A", capacity: 1 }], config: { lambdaMin: 1.2, lambdaMax: 1 } })).toThrow(
      /pausing\.lambdaMin: must be <= lambdaMax/,
    );
    expect(() => new PauseController({ clock, backends: [{ name: "A", capacity: 0 }] })).toThrow(/capacity: must be/);
    const ctl = new PauseController({ clock, backends: [{ name: "A", capacity: 10 }] });
    expect(() => ctl.onCallStart("p", "Z", 1)).toThrow(/unknown backend "Z"/);
    expect(() => ctl.onCallStart("p", "A", -1)).toThrow(/promptTokens must be an integer >= 0/);
    expect(ctl.config).toMatchObject({ lambdaMax: 1, lambdaMin: 1, intervalMs: 5000, forceResumeMs: 1_800_000, bufferPerProgram: 100 });
  });
});
