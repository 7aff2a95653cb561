import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { CostModelExecutor } from "./costmodel/costmodel-executor.js";
import { getCostProfile } from "./costmodel/profile.js";
import { KvBlockManager } from "./kv/block-manager.js";
import { Scheduler } from "./scheduler/scheduler.js";
import { runUntilIdle, SimEngine } from "./sim-engine.js";

function engine() {
  const clock = new VirtualClock();
  const kv = new KvBlockManager({ blockSize: 16, numBlocks: 256, enablePrefixCaching: true });
  const scheduler = new Scheduler(
    { maxNumBatchedTokens: 512, maxNumSeqs: 8, policy: "fcfs", enableChunkedPrefill: true, maxModelLen: 2048, stopTokenIds: [2], maxWaiting: 64 },
    kv,
    clock,
  );
  const executor = new CostModelExecutor(getCostProfile("llama-3-8b/h100"), new Rng(1), { vocabSize: 1000, stopTokenIds: [2] });
  const finished: string[] = [];
  const e = new SimEngine({ scheduler, executor, clock, onFinished: (f) => finished.push(`${f.requestId}@${clock.now().toFixed(3)}`) });
  return { clock, scheduler, executor, e, finished };
}

describe("SimEngine", () => {
  it("advances the virtual clock by each step's modelled time and serves timer arrivals", () => {
    const { clock, executor, e, finished } = engine();
    executor.setOutputLength("a", 3);
    e.submit({ requestId: "a", promptTokenIds: [5, 6, 7, 8], maxTokens: 10 });
    clock.setTimer(1000, () => {
      executor.setOutputLength("b", 2);
      e.submit({ requestId: "b", promptTokenIds: [5, 6, 7, 9], maxTokens: 10 });
    });
    runUntilIdle(clock, [e]);
    expect(finished.map((f) => f.split("@")[0])).toEqual(["a", "b"]);
    expect(e.usage.steps).toBe(5); // a: prefill + 2 decodes; b: prefill + 1 decode
    expect(Number(finished[1]!.split("@")[1])).toBeGreaterThan(1000);
    expect(e.usage.busyMs).toBeGreaterThan(0);
    expect(clock.now()).toBeCloseTo(Number(finished[1]!.split("@")[1]), 3);
  });

  it("reports a stuck engine instead of spinning: a paused program's request with nothing to wake it", () => {
    const { clock, scheduler, e } = engine();
    scheduler.pauseProgram("p", "drop");
    e.submit({ requestId: "held", promptTokenIds: [5, 6], maxTokens: 4, programId: "p" });
    expect(() => runUntilIdle(clock, [e])).toThrowError(/1 engine\(s\) stuck at 0 ms/);
    scheduler.restoreProgram("p");
    e.kick();
    runUntilIdle(clock, [e]);
    expect(e.hasWork()).toBe(false);
  });
});
