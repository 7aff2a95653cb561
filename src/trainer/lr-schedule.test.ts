// The learning-rate schedules against hand-worked values.
import { describe, expect, it } from "vitest";
import { scheduledLr } from "./lr-schedule.js";

describe("scheduledLr", () => {
  it("schedules the learning rate: constant, or linear warm-up then cosine decay to a tenth", () => {
    expect(scheduledLr(0.01, 7, 100)).toBe(0.01);
    expect(scheduledLr(0.01, 5, 100, "cosine", 10)).toBeCloseTo(0.005, 12);
    expect(scheduledLr(0.01, 10, 100, "cosine", 10)).toBeCloseTo(0.01, 12);
    expect(scheduledLr(0.01, 55, 100, "cosine", 10)).toBeCloseTo(0.0055, 12); // half-way: (1 + 0.1) / 2
    expect(scheduledLr(0.01, 100, 100, "cosine", 10)).toBeCloseTo(0.001, 12);
    const lrs = Array.from({ length: 90 }, (_, i) => scheduledLr(0.01, i + 11, 100, "cosine", 10));
    for (let i = 1; i < lrs.length; i++) expect(lrs[i]).toBeLessThan(lrs[i - 1] as number);
  });


  it("holds the floor past the last step (a run that trains on more batches than it planned)", () => {
    expect(scheduledLr(0.01, 120, 100, "cosine", 10)).toBeCloseTo(0.001, 12);
    // No warm-up: step 1 of 3 is a third of the way: 0.1 + 0.9·(1 + cos(π/3))/2 = 0.775.
    expect(scheduledLr(1, 1, 3, "cosine", 0)).toBeCloseTo(0.775, 12);
  });
});
