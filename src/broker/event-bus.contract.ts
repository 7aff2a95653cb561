// The EventBus contract: the in-process bus and JetStream run it (`event-bus.contract.test.ts`); waiting goes
// through the harness so neither reads the wall clock here.
import { afterEach, describe, expect, it } from "vitest";
import type { BusEvent, EventBus, EventMap } from "./event-bus.js";

/** The events the suite publishes. */
export interface TestEvents extends EventMap {
  version: { v: number };
  group: { g: string };
}

export interface EventBusHarness {
  /** Opens another client of this harness's bus (its own connection for JetStream). */
  open(): Promise<EventBus<TestEvents>>;
  /** Waits until `cond` holds; throws naming `what` after a bounded wait. */
  until(what: string, cond: () => boolean): Promise<void>;
  /** Lets a short while pass (for checking that nothing more arrives). */
  settle(): Promise<void>;
  dispose(): Promise<void>;
}

/** Runs the contract for one implementation; `make` gives a fresh bus for each test. */
export function describeEventBusContract(name: string, make: () => Promise<EventBusHarness>): void {
  describe(`EventBus contract: ${name}`, () => {
    let h: EventBusHarness | undefined;
    const start = async () => (h = await make());
    afterEach(async () => {
      await h?.dispose();
      h = undefined;
    });

    it("a late subscriber replaying all gets earlier events in order, then live ones; topics stay apart", async () => {
      const h = await start();
      const pub = await h.open();
      for (let v = 1; v <= 3; v++) await pub.publish("version", { v }, `v${v}`);
      await pub.publish("group", { g: "g1" }, "g1");
      const sub = await h.open();
      const seen: BusEvent<{ v: number }>[] = [];
      const s = await sub.subscribe("version", (e) => void seen.push(e), { replay: "all" });
      await h.until("three replayed", () => seen.length === 3);
      await pub.publish("version", { v: 4 }, "v4");
      await h.until("live event", () => seen.length === 4);
      await h.settle();
      await s.close();
      expect(seen.map((e) => [e.topic, e.id, e.data.v])).toEqual([
        ["version", "v1", 1],
        ["version", "v2", 2],
        ["version", "v3", 3],
        ["version", "v4", 4],
      ]);
      expect(seen.map((e) => e.seq)).toEqual([...seen.map((e) => e.seq)].sort((a, b) => a - b));
    });

    it("replay new delivers only what is published after subscribe resolves; afterSeq resumes after a seq", async () => {
      const h = await start();
      const bus = await h.open();
      const first = await bus.publish("version", { v: 1 }, "v1");
      const second = await bus.publish("version", { v: 2 }, "v2");
      const fresh: number[] = [];
      const resumed: number[] = [];
      const a = await bus.subscribe("version", (e) => void fresh.push(e.data.v), { replay: "new" });
      const b = await bus.subscribe("version", (e) => void resumed.push(e.data.v), { replay: { afterSeq: first.seq } });
      await bus.publish("version", { v: 3 }, "v3");
      await h.until("both got v3", () => fresh.includes(3) && resumed.includes(3));
      await h.settle();
      await Promise.all([a.close(), b.close()]);
      expect(second.duplicate).toBe(false);
      expect(fresh).toEqual([3]);
      expect(resumed).toEqual([2, 3]);
    });

    it("a second publish of an id is a duplicate and not delivered again", async () => {
      const h = await start();
      const bus = await h.open();
      expect((await bus.publish("group", { g: "a" }, "done-a")).duplicate).toBe(false);
      expect((await bus.publish("group", { g: "a2" }, "done-a")).duplicate).toBe(true);
      const seen: string[] = [];
      const s = await bus.subscribe("group", (e) => void seen.push(e.data.g), { replay: "all" });
      await h.until("one event", () => seen.length === 1);
      await h.settle();
      await s.close();
      expect(seen).toEqual(["a"]);
    });

    it("a throwing handler is reported and the subscription goes on; after close nothing arrives", async () => {
      const h = await start();
      const bus = await h.open();
      const errors: string[] = [];
      const seen: number[] = [];
      const s = await bus.subscribe("version", (e) => {
        seen.push(e.data.v);
        if (e.data.v === 1) throw new Error("engine 3 refused v1");
      }, { replay: "new", onError: (e) => errors.push(e.message) });
      await bus.publish("version", { v: 1 }, "v1");
      await bus.publish("version", { v: 2 }, "v2");
      await h.until("both handled", () => seen.length === 2);
      await s.close();
      await bus.publish("version", { v: 3 }, "v3");
      await h.settle();
      expect(seen).toEqual([1, 2]);
      expect(errors).toEqual(["engine 3 refused v1"]);
    });
  });
}
