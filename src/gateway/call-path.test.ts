import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { callRecorded, programForgotten, runCall, type CallPath } from "./call-path.js";
import type { CallGate } from "./pausing/call-gate.js";
import { ProgramTable } from "./program-table.js";
import { createPluginRouter, resolveRoutingConfig } from "./routing/registry.js";

/** A gate that logs what the path tells it and sends every call to `to` (after `hold`, if given). */
function loggingGate(to: string, hold?: Promise<void>): CallGate & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    async beforeCall(id, tokens, signal, preferred) {
      log.push(`before ${id} ${tokens} ${preferred ?? "-"}`);
      if (hold) await hold;
      signal?.throwIfAborted();
      return to;
    },
    afterCall: (id, total) => void log.push(`after ${id} ${total}`),
    onCallAbort: (id) => void log.push(`abort ${id}`),
    onRelease: (id) => void log.push(`release ${id}`),
    setBackendUp: (b, up) => void log.push(`${up ? "up" : "down"} ${b}`),
    close: async () => {},
  };
}

function makePath(gate?: CallGate): CallPath & { clock: VirtualClock } {
  const clock = new VirtualClock();
  return {
    clock,
    router: createPluginRouter(["a", "b"], resolveRoutingConfig("least-load")),
    table: new ProgramTable({ clock, maxPrograms: 8 }),
    history: new Map(),
    gateReady: gate ? Promise.resolve(gate) : undefined,
  };
}

describe("the gateway's call path (I/O-free; the HTTP gateway and the simulator both run it)", () => {
  it("opens, routes, binds and records a call; the table, history and router learn its tokens", async () => {
    const path = makePath();
    const out = await runCall(path, { programId: "p", start: 0, estimateTokens: () => 3 }, async (c) => {
      expect(c.place).toEqual({ programId: "p", index: 0, start: 0 });
      expect(path.table.get("p")).toMatchObject({ inFlight: 1, backend: c.route.backend, phase: "reasoning" });
      callRecorded(path, "p", [1, 2, 3], [4, 5]);
      c.recorded({ promptTokens: [1, 2, 3], outputTokens: [4, 5] });
      return c.route.backend;
    });
    expect(path.table.get("p")).toMatchObject({ calls: 1, inFlight: 0, contextTokens: 5, backend: out });
    expect(path.history.get("p")).toEqual([1, 2, 3, 4, 5]);
    // The next call of p is routed by its history; the router has settled the first one.
    expect(path.router.route({ programId: "p", promptTokens: [1, 2, 3, 4, 5] }).backend).toBeDefined();
  });

  it("keeps no history for a program released while its call ran (its release forgot it; nothing would again)", async () => {
    const path = makePath();
    await runCall(path, { programId: "p", start: 0, estimateTokens: () => 3 }, async (c) => {
      path.table.release("p");
      programForgotten(path, "p");
      callRecorded(path, "p", [1, 2, 3], [4, 5]);
      c.recorded({ promptTokens: [1, 2, 3], outputTokens: [4, 5] });
    });
    expect(path.table.get("p")).toMatchObject({ state: "terminated", calls: 1, inFlight: 0 });
    expect(path.history.has("p")).toBe(false);
  });

  it("fails an unrecorded call in the table, reports it failed and forgets the program it opened, when serving throws", async () => {
    const path = makePath();
    await expect(
      runCall(path, { programId: "p", start: 0, estimateTokens: () => 3 }, async () => {
        throw new Error("engine gone");
      }),
    ).rejects.toThrow("engine gone");
    // The program this first call opened is forgotten again: failed requests with fresh ids cannot fill the table.
    expect(path.table.get("p")).toBeUndefined();
    expect(path.history.has("p")).toBe(false);
  });

  it("asks the gate first (history length, or the estimate for a first call), routes only where it says, and tells it how the call ended", async () => {
    const gate = loggingGate("b");
    const path = makePath(gate);
    const serve = (ok: boolean) => async (c: Parameters<Parameters<typeof runCall>[2]>[0]) => {
      expect(c.route.backend).toBe("b");
      if (!ok) throw new Error("bad answer");
      callRecorded(path, "p", [1, 2, 3, 4], [5]);
      c.recorded({ promptTokens: [1, 2, 3, 4], outputTokens: [5] });
    };
    await runCall(path, { programId: "p", start: 0, estimateTokens: () => 7 }, serve(true));
    await expect(runCall(path, { programId: "p", start: 1, estimateTokens: () => 7 }, serve(false))).rejects.toThrow("bad answer");
    expect(gate.log).toEqual(["before p 7 -", "after p 5", "before p 5 b", "abort p"]);
  });

  it("ends a call held at the gate when its hold signal aborts, without afterCall or abort (the gate undid it)", async () => {
    let release!: () => void;
    const gate = loggingGate("a", new Promise<void>((r) => (release = r)));
    const path = makePath(gate);
    const ac = new AbortController();
    let detached = false;
    const call = runCall(
      path,
      { programId: "p", start: 0, estimateTokens: () => 1, holdSignal: () => ({ signal: ac.signal, detach: () => void (detached = true) }) },
      async () => "served",
    );
    ac.abort(new Error("client left"));
    release();
    await expect(call).rejects.toThrow("client left");
    expect(detached).toBe(true);
    // The program the held call opened is forgotten (released at the gate too), as no call of it was recorded.
    expect(gate.log).toEqual(["before p 1 -", "release p"]);
    expect(path.table.get("p")).toBeUndefined();
  });

  it("leaves the route to serving code that takes it (the token paths report their own attempts)", async () => {
    const path = makePath();
    let taken: { id: number; backend: string } | undefined;
    await runCall(path, { programId: "p", start: 0, estimateTokens: () => 1 }, async (c) => {
      taken = c.takeRoute();
      c.recorded();
    });
    // Not yet reported by the path: the router still counts it in flight until its taker reports it.
    expect(() => path.router.onFinished(taken!.id, { outputTokens: 1 })).not.toThrow();
  });

  it("forgets a released program's history, router binding and gate state", async () => {
    const gate = loggingGate("a");
    const path = makePath(gate);
    path.history.set("p", [1]);
    programForgotten(path, "p");
    await path.gateReady;
    await Promise.resolve();
    expect(path.history.has("p")).toBe(false);
    expect(path.router.boundBackend("p")).toBeUndefined();
    expect(gate.log).toEqual(["release p"]);
  });
});
