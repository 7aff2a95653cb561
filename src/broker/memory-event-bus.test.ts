// The in-process bus's bounds: a subscriber that falls off the end of the log is told which events it missed.
import { describe, expect, it } from "vitest";
import { MemoryEventBus } from "./memory-event-bus.js";

describe("MemoryEventBus", () => {
  it("reports events dropped from the bounded log to a subscriber resuming before them", async () => {
    const bus = new MemoryEventBus<{ v: { n: number } }>("bounded", { maxEvents: 2 });
    for (let n = 1; n <= 4; n++) await bus.publish("v", { n }, `e${n}`);
    const seen: number[] = [];
    const errors: string[] = [];
    const s = await bus.subscribe("v", (e) => void seen.push(e.data.n), { replay: "all", onError: (e) => errors.push(e.message) });
    for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    await s.close();
    expect(seen).toEqual([3, 4]);
    expect(errors).toEqual(["event bus bounded: subscriber of v missed events 1..2 (dropped from the log of 2)"]);
    expect(await bus.publish("v", { n: 9 }, "e2")).toEqual({ seq: 2, duplicate: true });
  });

  it("refuses a topic that is not a subject token", async () => {
    const bus = new MemoryEventBus<{ "a.b": number }>("t");
    await expect(bus.publish("a.b", 1, "x")).rejects.toThrow(/topic "a.b"/);
  });
});
