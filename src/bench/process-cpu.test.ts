import { describe, expect, it } from "vitest";
import { processCpuMs } from "./process-cpu.js";

describe("processCpuMs", () => {
  it("reads a process's CPU time, which grows as it computes; undefined for no such process", () => {
    const before = processCpuMs(process.pid);
    expect(before).toBeGreaterThanOrEqual(0);
    // Burn ~200 ms of CPU: /proc counts in 10 ms ticks.
    const own0 = process.cpuUsage();
    let x = 0;
    while (process.cpuUsage(own0).user < 200_000) for (let i = 0; i < 100_000; i++) x += Math.sqrt(x + 1);
    expect(x).toBeGreaterThan(0);
    expect(processCpuMs(process.pid)).toBeGreaterThanOrEqual((before as number) + 150);
    expect(processCpuMs(2 ** 22 + 12345)).toBeUndefined();
  });
});
