import { describe, expect, it } from "vitest";
import type { ArborEvents, BusEvent } from "../broker/event-bus.js";
import { MemoryEventBus } from "../broker/memory-event-bus.js";
import { announcedWeightSync } from "./announced-weight-sync.js";

describe("announcedWeightSync", () => {
  it("announces a version once every engine serves it, once per version and checkpoint, never after a failed load", async () => {
    const bus = new MemoryEventBus<ArborEvents>("test");
    const seen: BusEvent<ArborEvents["policy-version"]>[] = [];
    await bus.subscribe("policy-version", (e) => void seen.push(e), { replay: "all" });
    const loads: string[] = [];
    /** Events out when each load started: the event must not be out before the engines serve the version. */
    const announcedBefore: number[] = [];
    let fail = false;
    const sync = announcedWeightSync(
      {
        async load(path, version) {
          loads.push(`${version}:${path}`);
          announcedBefore.push(seen.length);
          if (fail) throw new Error("engine e1 refused the weights");
        },
      },
      bus,
    );
    await sync.load("/ckpt/v1.gguf", 1);
    // A retried sync of the same weights (a restarted orchestrator) announces nothing new.
    await sync.load("/ckpt/v1.gguf", 1);
    fail = true;
    await expect(sync.load("/ckpt/v2.gguf", 2)).rejects.toThrow(/refused/);
    fail = false;
    await sync.load("/ckpt/v2.gguf", 2);
    for (let i = 0; i < 10 && seen.length < 2; i++) await new Promise((r) => setImmediate(r));
    expect(loads).toEqual(["1:/ckpt/v1.gguf", "1:/ckpt/v1.gguf", "2:/ckpt/v2.gguf", "2:/ckpt/v2.gguf"]);
    expect(announcedBefore).toEqual([0, 1, 1, 1]);
    expect(seen.map((e) => [e.data, e.id])).toEqual([
      [{ version: 1, checkpoint: "/ckpt/v1.gguf" }, "weights:1:/ckpt/v1.gguf"],
      [{ version: 2, checkpoint: "/ckpt/v2.gguf" }, "weights:2:/ckpt/v2.gguf"],
    ]);
    await bus.close();
  });
});
