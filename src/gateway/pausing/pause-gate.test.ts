import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { BackendHttpError, type BackendMetrics, type GenerateResult, type TokenBackend } from "../../backends/backend.js";
import { VirtualClock } from "../../core/clock.js";
import { ArborError, CapacityError } from "../../core/errors.js";
import { PauseGate, type PauseGateConfig } from "./pause-gate.js";

/** A TokenBackend double: reports a settable capacity, records pause/restore, can fail or stall them. */
class FakeBackend implements TokenBackend {
  readonly url: string;
  readonly type = "fake";
  readonly capabilities;
  capacity: number | null;
  readonly engineCalls: string[] = [];
  failPause = false;
  failRestore = false;
  /** When set, restore waits for this promise. */
  restoreGate: Promise<void> | null = null;
  pause?: (programId: string) => Promise<void>;
  restore?: (programId: string) => Promise<{ kvTokens: number } | void>;
  shareProgram?: (programId: string) => Promise<void>;
  /** With `shared`, a tier the backends have in common: a shared program's KV is loadable by all. */
  refuseShare = false;

  constructor(
    readonly name: string,
    capacity: number | null,
    pauseRestore = true,
    shared?: Map<string, number>,
  ) {
    this.url = `http://fake-${name}/v1`;
    this.capacity = capacity;
    this.capabilities = { tokenIds: true, logprobs: true, pauseRestore };
    if (pauseRestore) {
      this.pause = async (id) => {
        this.engineCalls.push(`pause:${id}`);
        if (this.failPause) throw new Error("engine said no");
      };
      this.restore = async (id) => {
        this.engineCalls.push(`restore:${id}`);
        if (this.restoreGate) await this.restoreGate;
        if (this.failRestore) throw new Error("engine lost it");
        return { kvTokens: shared?.get(id) ?? 0 };
      };
    }
    if (shared) {
      this.shareProgram = async (id) => {
        this.engineCalls.push(`share:${id}`);
        if (this.refuseShare) throw new BackendHttpError(name, this.url, 400, "no L3 store is configured on this engine");
        shared.set(id, 700);
      };
    }
  }

  chatCompletions(): never {
    throw new Error("not used");
  }
  completions(): never {
    throw new Error("not used");
  }
  models(): never {
    throw new Error("not used");
  }
  async health(): Promise<void> {}
  generate(): Promise<GenerateResult> {
    throw new Error("not used");
  }
  async scrapeMetrics(): Promise<BackendMetrics> {
    return {
      running: 0,
      waiting: 0,
      kvUsage: 0,
      kvCapacityTokens: this.capacity,
      prefixCacheQueries: null,
      prefixCacheHits: null,
      prefixCacheHitRate: null,
    };
  }
}

const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

async function make(backends: FakeBackend[], config: PauseGateConfig = {}) {
  const clock = new VirtualClock(0);
  const registry = new Registry();
  const logs: string[] = [];
  const gate = await PauseGate.create({
    backends,
    clock,
    registry,
    config: { bufferPerProgram: 0, decayScope: "off", ...config },
    log: (l) => logs.push(l),
  });
  /** Value of one series (0 when absent). */
  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> => {
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
    const v = m?.values.find((s) => Object.entries(labels).every(([k, val]) => s.labels[k] === val));
    return v?.value ?? 0;
  };
  /** Change a backend's reported capacity, make the gate learn it, and run one tick. */
  const shrink = async (b: FakeBackend, capacity: number): Promise<void> => {
    b.capacity = capacity;
    await gate.refreshCapacities();
    clock.advance(gate.controller.config.intervalMs);
    await settle();
  };
  return { gate, clock, registry, logs, metric, shrink };
}

/** Run one call of `id` that ends with `total` tokens. */
async function call(gate: PauseGate, id: string, prompt: number, total: number): Promise<string> {
  const b = await gate.beforeCall(id, prompt);
  gate.afterCall(id, total);
  return b;
}

/** p (700 tokens) and q (250) on A (C=1000); shrinking C to 800 pauses q, the smaller acting program. */
async function pausedQ(a: FakeBackend, config: PauseGateConfig = {}) {
  const t = await make([a], config);
  expect(await call(t.gate, "p", 600, 700)).toBe("A");
  expect(await call(t.gate, "q", 200, 250)).toBe("A");
  await t.shrink(a, 800);
  expect(t.gate.controller.get("q")).toMatchObject({ state: "paused", originBackend: "A" });
  return t;
}

describe("PauseGate", () => {
  it("sends no call to a backend out of rotation, and asks capacities again when it comes back", async () => {
    const a = new FakeBackend("A", 1000);
    const b = new FakeBackend("B", 1000);
    const { gate } = await make([a, b]);
    // The least used backend is A (a tie, first listed); out of rotation, B takes the call.
    gate.setBackendUp("A", false);
    expect(await gate.beforeCall("p", 100)).toBe("B");
    // Even where the router prefers A.
    expect(await gate.beforeCall("q", 100, undefined, "A")).toBe("B");
    a.capacity = 4000;
    gate.setBackendUp("A", true);
    await settle();
    expect(gate.controller.usage().find((u) => u.backend === "A")?.capacity).toBe(4000);
    expect(await gate.beforeCall("r", 100, undefined, "A")).toBe("A");
    // After close, a late health transition changes nothing.
    await gate.close();
    gate.setBackendUp("A", false);
    expect(gate.controller.isUp("A")).toBe(true);
  });

  it("pauses on the engine, holds the next call, restores on the engine and then releases the call", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, metric, shrink } = await pausedQ(a);
    expect(a.engineCalls).toEqual(["pause:q"]);
    let got: string | undefined;
    const held = gate.beforeCall("q", 260).then((b) => (got = b));
    await settle();
    expect(got).toBeUndefined();
    expect(gate.heldCalls).toBe(1);
    expect(await metric("arbor_gateway_held_calls")).toBe(1);
    expect(await metric("arbor_gateway_pausing_programs", { state: "paused" })).toBe(1);

    await shrink(a, 2000);
    await held;
    expect(got).toBe("A");
    expect(a.engineCalls).toEqual(["pause:q", "restore:q"]);
    expect(gate.heldCalls).toBe(0);
    expect(gate.controller.get("q")).toMatchObject({ state: "active", backend: "A", inFlight: 1 });
    gate.afterCall("q", 300);
    expect(await metric("arbor_gateway_pauses_total", { backend: "A", mode: "engine" })).toBe(1);
    expect(await metric("arbor_gateway_restores_total", { backend: "A", mode: "engine" })).toBe(1);
    // q's footprint when paused: the 250 tokens of its last call.
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(250);
    expect(await metric("arbor_gateway_held_calls_ended_total", { outcome: "released" })).toBe(1);
    expect(await metric("arbor_gateway_pausing_capacity_tokens", { backend: "A" })).toBe(2000);
    await gate.close();
  });

  it("pauses at the proxy on a backend without engine pause/restore", async () => {
    const a = new FakeBackend("A", 1000, false);
    const { gate, metric, shrink } = await pausedQ(a);
    const held = gate.beforeCall("q", 260);
    await shrink(a, 2000);
    expect(await held).toBe("A");
    expect(a.engineCalls).toEqual([]);
    expect(await metric("arbor_gateway_pauses_total", { backend: "A", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_restores_total", { backend: "A", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(0);
    await gate.close();
  });

  it("a held call whose signal aborts is removed and the controller told; the restore then releases nothing", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, metric, shrink } = await pausedQ(a);
    const ac = new AbortController();
    const held = gate.beforeCall("q", 260, ac.signal);
    await settle();
    expect(gate.controller.get("q")?.waitingCalls).toBe(1);
    ac.abort(new ArborError("client went away", "aborted"));
    await expect(held).rejects.toThrow(/client went away/);
    expect(gate.heldCalls).toBe(0);
    expect(gate.controller.get("q")).toMatchObject({ waitingCalls: 0, phase: "acting", state: "paused" });
    await shrink(a, 2000);
    expect(gate.controller.get("q")).toMatchObject({ state: "active", inFlight: 0 });
    expect(await metric("arbor_gateway_held_calls_ended_total", { outcome: "aborted" })).toBe(1);
    // An already aborted signal is refused before the controller sees the call.
    await expect(gate.beforeCall("p", 10, AbortSignal.abort(new Error("gone")))).rejects.toThrow(/gone/);
    expect(gate.controller.get("p")?.inFlight).toBe(0);
    await gate.close();
  });

  it("a call aborted while the engine restore runs is an in-flight abort; later calls wait for the restore", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, shrink } = await pausedQ(a);
    let open!: () => void;
    a.restoreGate = new Promise<void>((r) => (open = r));
    const ac = new AbortController();
    const held = gate.beforeCall("q", 260, ac.signal);
    await shrink(a, 2000);
    // Granted but the engine has not answered: the call still waits.
    expect(gate.controller.get("q")).toMatchObject({ state: "active", inFlight: 1 });
    expect(gate.heldCalls).toBe(1);
    ac.abort(new Error("bye"));
    await expect(held).rejects.toThrow(/bye/);
    expect(gate.controller.get("q")).toMatchObject({ inFlight: 0, phase: "acting" });
    let got: string | undefined;
    const next = gate.beforeCall("q", 260).then((b) => (got = b));
    await settle();
    expect(got).toBeUndefined();
    open();
    expect(await next).toBe("A");
    await gate.close();
  });

  it("refuses a held call beyond maxHeldCalls with a CapacityError and keeps the controller in step", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, metric } = await pausedQ(a, { maxHeldCalls: 1 });
    const first = gate.beforeCall("q", 260);
    const second = gate.beforeCall("q", 260);
    await expect(second).rejects.toBeInstanceOf(CapacityError);
    await expect(second).rejects.toThrow(/pausing\.maxHeldCalls .* is full \(limit 1\)/);
    expect(gate.controller.get("q")?.waitingCalls).toBe(1);
    expect(await metric("arbor_gateway_held_calls_ended_total", { outcome: "rejected_full" })).toBe(1);
    await gate.close();
    await expect(first).rejects.toThrow(/closed/);
  });

  it("force-resumes a held call after forceResumeMs even without room", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, clock, metric } = await make([a], { forceResumeMs: 12_000, tickMs: 5000 });
    let got: string | undefined;
    const held = gate.beforeCall("huge", 5000).then((b) => (got = b));
    clock.advance(10_000);
    await settle();
    expect(got).toBeUndefined();
    clock.advance(5000);
    expect(await held).toBe("A");
    expect(await metric("arbor_gateway_force_resumes_total")).toBe(1);
    expect(await metric("arbor_gateway_admits_total", { backend: "A" })).toBe(1);
    await gate.close();
  });

  it("a failing engine pause falls back to proxy pausing; the program and its call are kept", async () => {
    const a = new FakeBackend("A", 1000);
    a.failPause = true;
    const { gate, metric, logs, shrink } = await pausedQ(a);
    expect(await metric("arbor_gateway_pause_engine_failures_total", { backend: "A", op: "pause" })).toBe(1);
    expect(await metric("arbor_gateway_pauses_total", { backend: "A", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_pauses_total", { backend: "A", mode: "engine" })).toBe(0);
    expect(logs.join("\n")).toMatch(/engine pause of program q on backend 'A' failed, holding at the proxy: engine said no/);
    const held = gate.beforeCall("q", 260);
    a.failRestore = true;
    await shrink(a, 2000);
    expect(await held).toBe("A");
    // Restore is tried in case the engine did pause; its failure is expected and not counted.
    expect(a.engineCalls).toEqual(["pause:q", "restore:q"]);
    expect(await metric("arbor_gateway_pause_engine_failures_total", { backend: "A", op: "restore" })).toBe(0);
    expect(await metric("arbor_gateway_restores_total", { backend: "A", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(0);
    await gate.close();
  });

  it("a failing engine restore is counted and logged, and the held call still goes (recompute)", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, metric, logs, shrink } = await pausedQ(a);
    a.failRestore = true;
    const held = gate.beforeCall("q", 260);
    await shrink(a, 2000);
    expect(await held).toBe("A");
    expect(await metric("arbor_gateway_pause_engine_failures_total", { backend: "A", op: "restore" })).toBe(1);
    expect(await metric("arbor_gateway_restores_total", { backend: "A", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(0);
    expect(logs.join("\n")).toMatch(/engine restore of program q on backend 'A' failed; its next call re-prefills: engine lost it/);
    await gate.close();
  });

  it("a program restored onto another backend is let go on its origin engine and counts no avoided recompute", async () => {
    const a = new FakeBackend("A", 1000);
    const b = new FakeBackend("B", 1000);
    const { gate, metric, shrink } = await make([a, b]);
    expect(await gate.beforeCall("p", 600, undefined, "A")).toBe("A");
    gate.afterCall("p", 700);
    await shrink(a, 500);
    expect(a.engineCalls).toEqual(["pause:p"]);
    // The tick that paused p ran its restore pass first; the next one moves p to B (A has no room for 700).
    const held = gate.beforeCall("p", 710, undefined, "A");
    await shrink(a, 500);
    expect(await held).toBe("B");
    expect(a.engineCalls).toEqual(["pause:p", "restore:p"]);
    expect(b.engineCalls).toEqual([]);
    expect(await metric("arbor_gateway_restores_total", { backend: "B", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(0);
    await gate.close();
  });

  /** p (700 tokens) paused on A, then restored onto B (A keeps no room for it). */
  async function movedP(a: FakeBackend, b: FakeBackend, id = "p") {
    const t = await make([a, b]);
    expect(await t.gate.beforeCall(id, 600, undefined, "A")).toBe("A");
    t.gate.afterCall(id, 700);
    await t.shrink(a, 500);
    const held = t.gate.beforeCall(id, 710, undefined, "A");
    await t.shrink(a, 500);
    expect(await held).toBe("B");
    return t;
  }

  it("a program restored onto a backend sharing a KV tier has its KV moved there and counts the avoided recompute", async () => {
    const shared = new Map<string, number>();
    const a = new FakeBackend("A", 1000, true, shared);
    const b = new FakeBackend("B", 1000, true, shared);
    const { gate, metric } = await movedP(a, b);
    // The origin shares the KV, the target learns of it, then the origin lets the program go.
    expect(a.engineCalls).toEqual(["pause:p", "share:p", "restore:p"]);
    expect(b.engineCalls).toEqual(["restore:p"]);
    expect(await metric("arbor_gateway_kv_moves_total", { from: "A", to: "B" })).toBe(1);
    expect(await metric("arbor_gateway_restores_total", { backend: "B", mode: "engine" })).toBe(1);
    expect(await metric("arbor_gateway_recompute_avoided_tokens_total")).toBe(700);
    await gate.close();
  });

  it("an origin that refuses to share (HTTP 400: no shared tier) is not asked again; its programs re-prefill", async () => {
    const shared = new Map<string, number>();
    const a = new FakeBackend("A", 1000, true, shared);
    const b = new FakeBackend("B", 1000, true, shared);
    a.refuseShare = true;
    const { gate, metric, logs, shrink } = await movedP(a, b);
    expect(a.engineCalls).toEqual(["pause:p", "share:p", "restore:p"]);
    expect(b.engineCalls).toEqual([]);
    expect(await metric("arbor_gateway_restores_total", { backend: "B", mode: "proxy" })).toBe(1);
    expect(await metric("arbor_gateway_kv_moves_total", { from: "A", to: "B" })).toBe(0);
    expect(logs.join("\n")).toMatch(/backend 'A' shares no KV tier with other engines/);
    // A second program paused on A and moved (p ended, leaving B room): no share asked.
    gate.afterCall("p", 710);
    gate.onRelease("p");
    await shrink(a, 2000);
    expect(await gate.beforeCall("r", 600, undefined, "A")).toBe("A");
    gate.afterCall("r", 700);
    await shrink(a, 500);
    const held = gate.beforeCall("r", 710, undefined, "A");
    await shrink(a, 500);
    expect(await held).toBe("B");
    expect(a.engineCalls.filter((c) => c.startsWith("share:"))).toEqual(["share:p"]);
    await gate.close();
  });

  it("onRelease fails the program's held calls and lets its engine state go", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, metric } = await pausedQ(a);
    const held = gate.beforeCall("q", 260);
    gate.onRelease("q");
    await expect(held).rejects.toMatchObject({ code: "program_released" });
    await settle();
    expect(a.engineCalls).toEqual(["pause:q", "restore:q"]);
    expect(gate.controller.get("q")).toBeUndefined();
    expect(gate.heldCalls).toBe(0);
    expect(await metric("arbor_gateway_held_calls_ended_total", { outcome: "program_released" })).toBe(1);
    await gate.close();
  });

  it("ticks on the clock until closed; close fails held calls and refuses new ones", async () => {
    const a = new FakeBackend("A", 1000);
    const { gate, clock } = await make([a], { tickMs: 1000 });
    expect(clock.pendingTimers).toBe(1);
    const held = gate.beforeCall("big", 5000);
    await gate.close();
    await expect(held).rejects.toThrow(/closed while the call was held/);
    expect(clock.pendingTimers).toBe(0);
    await expect(gate.beforeCall("x", 1)).rejects.toThrow(/closed/);
  });

  it("learns capacities from the backends, or from config, and names what is missing", async () => {
    const clock = new VirtualClock(0);
    const opts = { clock, registry: new Registry() };
    await expect(PauseGate.create({ ...opts, backends: [new FakeBackend("A", null)] })).rejects.toThrow(
      /pausing\.capacities\.A: backend 'A' reports no KV capacity/,
    );
    await expect(PauseGate.create({ ...opts, backends: [new FakeBackend("A", 10)], config: { capacities: { Z: 5 } } })).rejects.toThrow(
      /pausing\.capacities\.Z: no backend of that name/,
    );
    await expect(PauseGate.create({ ...opts, backends: [new FakeBackend("A", 10)], config: { maxHeldCalls: -1 } })).rejects.toThrow(
      /pausing\.maxHeldCalls: must be an integer >= 0/,
    );
    const g = await PauseGate.create({ ...opts, registry: new Registry(), backends: [new FakeBackend("A", null), new FakeBackend("B", 64)], config: { capacities: { A: 32 } } });
    expect(g.controller.usage().map((u) => [u.backend, u.capacity])).toEqual([
      ["A", 32],
      ["B", 64],
    ]);
    await g.close();
  });
});
