import { describe, expect, it } from "vitest";
import { LlamaSlotTable } from "./llamacpp-slots.js";

describe("LlamaSlotTable", () => {
  it("keeps a program on its slot and hands the least recently used program's slot on when full", () => {
    const t = new LlamaSlotTable(2);
    expect(t.slotFor("a")).toBe(0);
    expect(t.slotFor("b")).toBe(1);
    expect(t.slotFor("a")).toBe(0);
    // b is now the least recently used.
    expect(t.slotFor("c")).toBe(1);
    expect(t.get("b")).toBeUndefined();
    t.release("a");
    expect(t.slotFor("d")).toBe(0);
  });

  it("rejects a bad slot count", () => {
    expect(() => new LlamaSlotTable(0)).toThrow("llama-server slots: must be an integer >= 1, got 0");
  });
});
