import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { PauseController, type PauseAction } from "./pause-controller.js";

const IDS = ["p0", "p1", "p2", "p3", "p4", "p5"];
const BACKENDS = [
  { name: "A", capacity: 1000 },
  { name: "B", capacity: 600 },
];
const FORCE_MS = 60_000;
const INTERVAL_MS = 5000;

type Op =
  | { t: "start"; p: number; b: number; tokens: number }
  | { t: "end"; p: number; tokens: number }
  | { t: "release"; p: number }
  | { t: "abortHeld"; p: number }
  | { t: "tick"; dt: number }
  | { t: "health"; b: number; up: boolean };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant("start" as const), p: fc.nat(IDS.length - 1), b: fc.nat(1), tokens: fc.nat(900) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("end" as const), p: fc.nat(IDS.length - 1), tokens: fc.nat(1100) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("release" as const), p: fc.nat(IDS.length - 1) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("abortHeld" as const), p: fc.nat(IDS.length - 1) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("tick" as const), dt: fc.nat(12_000) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("health" as const), b: fc.nat(1), up: fc.boolean() }) },
);

const configArb = fc.record({
  lambdaMax: fc.constantFrom(0.8, 1),
  lambdaMinFrac: fc.constantFrom(0.5, 1),
  decayScope: fc.constantFrom("usage" as const, "restore" as const, "off" as const),
  placement: fc.constantFrom("most-free" as const, "best-fit" as const, "origin" as const),
  bufferPerProgram: fc.constantFrom(0, 50),
});

describe("PauseController properties (fast-check)", () => {
  it("never active and paused at once, pause pass bounds usage, nothing placed out of rotation, every held call is admitted", () => {
    fc.assert(
      fc.property(configArb, fc.array(opArb, { maxLength: 80 }), (cfg, ops) => {
        const clock = new VirtualClock(0);
        const ctl = new PauseController({
          clock,
          backends: BACKENDS,
          config: {
            lambdaMax: cfg.lambdaMax,
            lambdaMin: cfg.lambdaMax * cfg.lambdaMinFrac,
            decayScope: cfg.decayScope,
            placement: cfg.placement,
            bufferPerProgram: cfg.bufferPerProgram,
            forceResumeMs: FORCE_MS,
            intervalMs: INTERVAL_MS,
          },
        });
        // What the proxy sees: calls at a backend and calls held, per program.
        const inFlight = new Map<string, number>();
        const held = new Map<string, number>();
        const released = new Set<string>();
        const n = (m: Map<string, number>, id: string): number => m.get(id) ?? 0;
        // Backends out of rotation: nothing goes there while another is in.
        const down = new Set<string>();
        const placeable = (b: string): boolean => !down.has(b) || down.size === BACKENDS.length;

        const apply = (actions: PauseAction[]): void => {
          for (const a of actions) {
            if (a.kind === "pause") {
              expect(down.has(a.backend)).toBe(false);
              continue;
            }
            expect(placeable(a.backend)).toBe(true);
            expect(n(held, a.programId)).toBe(a.releasedCalls);
            held.set(a.programId, 0);
            inFlight.set(a.programId, n(inFlight, a.programId) + a.releasedCalls);
          }
        };

        const checkTable = (): void => {
          const queue = new Set(ctl.waitingQueue());
          for (const row of ctl.list()) {
            expect(["active", "paused"]).toContain(row.state);
            const paused = row.state === "paused";
            expect(queue.has(row.id)).toBe(paused);
            if (paused) {
              if (row.originBackend !== null) expect(down.has(row.originBackend)).toBe(false);
              expect(row.backend).toBeNull();
              expect(row.inFlight).toBe(0);
              expect(row.markedForPause).toBe(false);
            } else {
              expect(row.backend).not.toBeNull();
              expect(row.waitingCalls).toBe(0);
              // On a backend out of rotation only until its calls end, marked for that.
              if (down.has(row.backend as string)) expect(row.inFlight > 0 && row.markedForPause).toBe(true);
            }
            expect(row.waitingCalls).toBe(n(held, row.id));
            expect(row.inFlight).toBe(n(inFlight, row.id));
          }
          expect(queue.size).toBe(ctl.list().filter((r) => r.state === "paused").length);
        };

        const tickAndCheck = (): void => {
          apply(ctl.tick());
          const rows = ctl.list();
          for (const u of ctl.usage()) {
            const limit = cfg.lambdaMax * u.capacity;
            const onIt = rows.filter((r) => r.state === "active" && r.backend === u.backend);
            const onlyMarked = onIt.every((r) => r.markedForPause && r.inFlight > 0);
            expect(u.projectedUsage <= limit + 1e-6 || onlyMarked).toBe(true);
          }
        };

        for (const op of ops) {
          const id = IDS[op.t === "tick" || op.t === "health" ? 0 : op.p] as string;
          if (op.t === "start") {
            if (released.has(id)) continue;
            const d = ctl.onCallStart(id, BACKENDS[op.b]?.name as string, op.tokens);
            const row = ctl.get(id);
            if (d.kind === "go") {
              expect(row?.state).toBe("active");
              // A program already placed keeps its backend until that leaves rotation; a new one never goes out of rotation.
              if (row?.callsStarted === 1) expect(placeable(d.backend)).toBe(true);
              expect(d.backend).toBe(row?.backend);
              inFlight.set(id, n(inFlight, id) + 1);
            } else {
              expect(row?.state).toBe("paused");
              held.set(id, n(held, id) + 1);
            }
          } else if (op.t === "end") {
            if (n(inFlight, id) === 0) continue;
            inFlight.set(id, n(inFlight, id) - 1);
            apply(ctl.onCallEnd(id, op.tokens));
          } else if (op.t === "release") {
            expect(ctl.onRelease(id)).toBe(n(held, id));
            released.add(id);
            held.delete(id);
            inFlight.delete(id);
          } else if (op.t === "abortHeld") {
            // The proxy gives up one held call (client gone); a no-op when none is held.
            ctl.onHeldCallAbort(id);
            if (n(held, id) > 0) held.set(id, n(held, id) - 1);
          } else if (op.t === "health") {
            const b = BACKENDS[op.b]?.name as string;
            if (op.up) down.delete(b);
            else down.add(b);
            apply(ctl.setBackendUp(b, op.up));
          } else {
            clock.advance(op.dt);
            tickAndCheck();
          }
          checkTable();
        }

        // Drain: finish every call at a backend, then keep ticking; the force-resume bound
        // guarantees every held call goes within FORCE_MS plus a tick.
        const finishAll = (): void => {
          for (const [id, k] of [...inFlight]) {
            for (let i = 0; i < k; i++) {
              inFlight.set(id, n(inFlight, id) - 1);
              apply(ctl.onCallEnd(id, 10));
            }
          }
        };
        for (let i = 0; i <= FORCE_MS / INTERVAL_MS + 2; i++) {
          finishAll();
          clock.advance(INTERVAL_MS);
          tickAndCheck();
          checkTable();
        }
        for (const [id, k] of held) expect(k, `held call of ${id} never admitted`).toBe(0);
      }),
      { numRuns: 300 },
    );
  });
});
