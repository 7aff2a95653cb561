import { describe, expect, it } from "vitest";
import { choosePlacement } from "./disagg-placement.js";

const cost = { queueMsPerRequest: 50, transferBytesPerMs: 1000, transferLatencyMs: 2, kvBytesPerToken: 0 };

describe("choosePlacement (Forge's cost-aware routing)", () => {
  it("keeps a call whole on an idle mixed engine: nothing to move", () => {
    expect(choosePlacement(100, { prefill: [0], decode: [0], mixed: [0] }, 1000, cost)).toEqual({ kind: "mixed", engine: 0, costMs: 0 });
  });

  it("splits when the mixed engines' queueing delay exceeds the KV transfer", () => {
    // Transfer: 2 ms + 2 × 100 tokens × 100 B / 1000 B/ms = 22 ms; the mixed engine waits 2 × 50 ms.
    expect(choosePlacement(100, { prefill: [1, 0], decode: [3, 0, 2], mixed: [2] }, 100, cost)).toEqual({ kind: "split", prefill: 1, decode: 1, costMs: 22, transferMs: 22 });
  });

  it("stays on a busy mixed engine when moving the KV costs more than waiting", () => {
    // Transfer: 2 + 2 × 1000 × 1000 / 1000 = 2002 ms against 150 ms of queueing.
    expect(choosePlacement(1000, { prefill: [0], decode: [0], mixed: [3] }, 1000, cost)).toMatchObject({ kind: "mixed", costMs: 150 });
  });

  it("counts the queues of both halves, picking the least-loaded engine of each role", () => {
    const p = choosePlacement(10, { prefill: [4, 2], decode: [1, 5], mixed: [] }, 0, cost);
    expect(p).toEqual({ kind: "split", prefill: 1, decode: 0, costMs: 2 * 50 + 2 + 1 * 50, transferMs: 2 });
  });

  it("needs a placement and validates its options", () => {
    expect(() => choosePlacement(10, { prefill: [0], decode: [], mixed: [] }, 0, cost)).toThrow(/needs a mixed engine, or a prefill and a decode engine/);
    expect(() => choosePlacement(10, { prefill: [], decode: [], mixed: [0] }, 0, { transferBytesPerMs: 0 })).toThrow(/transferBytesPerMs/);
  });
});
