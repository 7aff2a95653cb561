import { describe, expect, it } from "vitest";
import { planRestore, type RestoreCandidate } from "./restore-packing.js";

const cand = (id: string, tokens: number, group: RestoreCandidate["group"], order = 0): RestoreCandidate => ({
  id,
  tokens,
  group,
  order,
});

describe("planRestore", () => {
  it("selects by priority within the total room, then places largest-first (worked by hand)", () => {
    // Room A 1000 + B 600 = 1600. Priority: r1 500, r2 700 (reasoning), n1 300 (new), a1 100, a2 450 (acting).
    // Cumulative 500, 1200, 1500, 1600 (a1 fits exactly), a2 would be 2050: skipped.
    // Decreasing: r2 700 → A (300 left); r1 500 → B (100 left); n1 300 → A (0); a1 100 → B (0).
    const plan = planRestore(
      [cand("a2", 450, "acting"), cand("n1", 300, "new"), cand("r2", 700, "reasoning"), cand("a1", 100, "acting"), cand("r1", 500, "reasoning")],
      [
        { backend: "A", free: 1000 },
        { backend: "B", free: 600 },
      ],
      0,
      "most-free",
    );
    expect(plan).toEqual([
      { id: "r2", backend: "A" },
      { id: "r1", backend: "B" },
      { id: "n1", backend: "A" },
      { id: "a1", backend: "B" },
    ]);
  });

  it("most-free (ThunderAgent) and best-fit differ as worked by hand", () => {
    const cs = [cand("x", 500, "reasoning"), cand("y", 400, "reasoning")];
    const bins = [
      { backend: "A", free: 1000 },
      { backend: "B", free: 600 },
    ];
    // most-free: x → A (500 left), y → B (600 > 500).
    expect(planRestore(cs, bins, 0, "most-free")).toEqual([
      { id: "x", backend: "A" },
      { id: "y", backend: "B" },
    ]);
    // best-fit: x → B (600 is the tightest fit), y → A (only A still fits 400).
    expect(planRestore(cs, bins, 0, "best-fit")).toEqual([
      { id: "x", backend: "B" },
      { id: "y", backend: "A" },
    ]);
  });

  it("origin restores a paused program only where it was paused, waiting while that has no room; a new one goes to the most free", () => {
    const bins = [
      { backend: "A", free: 1000 },
      { backend: "B", free: 600 },
    ];
    const cs = [
      { ...cand("x", 500, "reasoning"), origin: "B" },
      { ...cand("y", 200, "reasoning"), origin: "B" },
      { ...cand("z", 300, "acting"), origin: "C" },
      { ...cand("n", 100, "new"), origin: null },
    ];
    // All four fit the total room (1,600) and are selected. Largest first: x → B (100 left); z's origin C has
    // no room: it stays queued; y → its origin B no longer fits it: queued too; n → A, the most free.
    expect(planRestore(cs, bins, 0, "origin")).toEqual([
      { id: "x", backend: "B" },
      { id: "n", backend: "A" },
    ]);
    // A program whose origin has no room still holds the room it was selected for. 400 free in all: y (200, origin
    // A, where 100 is free) is selected and stays queued; x (500) exceeds the total; n (300, new) would fit B, but
    // after y only 200 of the total is left, so n waits too.
    expect(
      planRestore([{ ...cand("y", 200, "reasoning"), origin: "A" }, { ...cand("x", 500, "reasoning"), origin: "A" }, { ...cand("n", 300, "new"), origin: null }], [{ backend: "A", free: 100 }, { backend: "B", free: 300 }], 0, "origin"),
    ).toEqual([]);
    // most-free ignores origins: x → A (500 left), z → B (300 left), y → A (300 left), n → A (the first of a tie).
    expect(planRestore(cs, bins, 0, "most-free")).toEqual([
      { id: "x", backend: "A" },
      { id: "z", backend: "B" },
      { id: "y", backend: "A" },
      { id: "n", backend: "A" },
    ]);
  });

  it("leaves a program that fits no single backend queued, counts the buffer, ignores full bins", () => {
    const bins = [
      { backend: "A", free: 1000 },
      { backend: "B", free: 600 },
      { backend: "C", free: -50 },
    ];
    // z 1200 is selected (total room 1600) but fits no bin; w 300 + buffer 50 goes to A.
    expect(planRestore([cand("z", 1200, "reasoning"), cand("w", 300, "acting")], bins, 50, "most-free")).toEqual([
      { id: "w", backend: "A" },
    ]);
    // With buffer 50, two programs of 560 need 610 each: one per bin at most, and B (600) takes none.
    expect(planRestore([cand("p", 560, "new", 0), cand("q", 560, "new", 1)], bins, 50, "best-fit")).toEqual([
      { id: "p", backend: "A" },
    ]);
  });
});
