import { describe, expect, it } from "vitest";
import { VirtualClock } from "./clock.js";
import { retrying } from "./retry.js";

/** Let the retries run: settle pending promises, then fire the next pause, until none is left. */
async function drive(clock: VirtualClock): Promise<void> {
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setImmediate(r));
    clock.step();
  }
}

describe("retrying", () => {
  it("retries with doubling pauses until the operation succeeds", async () => {
    const clock = new VirtualClock();
    const at: number[] = [];
    let calls = 0;
    const done = retrying("publish x", async () => {
      at.push(clock.now());
      if (++calls < 4) throw new Error("disconnected");
      return "ok";
    }, clock);
    await drive(clock);
    expect(await done).toBe("ok");
    expect(at.slice(1).map((t, i) => t - (at[i] as number))).toEqual([500, 1000, 2000]);
  });

  it("gives up after the attempts, naming the operation and the last error", async () => {
    const clock = new VirtualClock();
    const retried: number[] = [];
    const done = retrying("publish y", async () => Promise.reject(new Error("timeout")), clock, { attempts: 3, onRetry: (_e, n) => retried.push(n) });
    const failed = expect(done).rejects.toThrow("publish y: failed 3 times, last: timeout");
    await drive(clock);
    await failed;
    expect(retried).toEqual([1, 2]);
  });

  it("rethrows at once a failure that is not retryable", async () => {
    let calls = 0;
    const done = retrying("create p", async () => {
      calls++;
      throw new Error("409 exists");
    }, new VirtualClock(), { retryable: (e) => !e.message.startsWith("409") });
    await expect(done).rejects.toThrow("409 exists");
    expect(calls).toBe(1);
  });
});
