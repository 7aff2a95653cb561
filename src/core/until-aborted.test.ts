import { describe, expect, it } from "vitest";
import { untilAborted } from "./until-aborted.js";

describe("untilAborted", () => {
  it("gives the work's result, or the signal's reason once aborted (before or while waiting), leaving no listener", async () => {
    const ac = new AbortController();
    await expect(untilAborted(Promise.resolve(3), ac.signal)).resolves.toBe(3);
    await expect(untilAborted(Promise.reject(new Error("work failed")), ac.signal)).rejects.toThrow("work failed");
    const never = new Promise<number>(() => undefined);
    const waiting = untilAborted(never, ac.signal);
    ac.abort(new Error("stopped"));
    await expect(waiting).rejects.toThrow("stopped");
    await expect(untilAborted(never, ac.signal)).rejects.toThrow("stopped");
  });
});
