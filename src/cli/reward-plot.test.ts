import { describe, expect, it } from "vitest";
import { rewardPlotSvg, sparkline } from "./reward-plot.js";

describe("reward plot", () => {
  it("draws one point per iteration, higher reward higher up, with its value", () => {
    const svg = rewardPlotSvg([
      { iteration: 1, meanReward: 0.25 },
      { iteration: 2, meanReward: 0.5 },
      { iteration: 3, meanReward: 0.75 },
    ]);
    expect(svg.startsWith("<svg xmlns=\"http://www.w3.org/2000/svg\"")).toBe(true);
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
    const ys = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => [Number(m[1]), Number(m[2])] as const);
    expect(ys).toHaveLength(3);
    // SVG y grows downwards: a rising reward means falling y, and x advances with the iteration.
    expect(ys[0]![1]).toBeGreaterThan(ys[1]![1]);
    expect(ys[1]![1]).toBeGreaterThan(ys[2]![1]);
    expect(ys[0]![0]).toBeLessThan(ys[1]![0]);
    expect(svg).toContain(">0.75</text>");
    expect(svg).toContain("iteration 2: 0.500");
    expect(svg.match(/<path d="M[^"]+"/)?.[0].split(" L")).toHaveLength(3);
  });

  it("stretches the axis to fit rewards outside [0, 1] and escapes the title", () => {
    const svg = rewardPlotSvg([{ iteration: 1, meanReward: -0.5 }, { iteration: 2, meanReward: 1.5 }], "a < b & c");
    expect(svg).toContain(">-0.50</text>");
    expect(svg).toContain(">1.50</text>");
    expect(svg).toContain("a &lt; b &amp; c");
  });

  it("draws each reward component as a dashed line with a legend, on an axis that fits them", () => {
    const svg = rewardPlotSvg([
      { iteration: 1, meanReward: -0.2, components: { outcome: 0.1, process: -0.3 } },
      { iteration: 2, meanReward: 0.4, components: { outcome: 0.5, process: -0.1 } },
    ]);
    const dashed = [...svg.matchAll(/<path d="(M[^"]+)"[^>]*stroke-dasharray="5 3"><title>(\w+)<\/title>/g)].map((m) => [m[2], m[1]]);
    expect(dashed.map(([n]) => n)).toEqual(["outcome", "process"]);
    // Rising outcome: its second point sits higher (smaller y) than its first.
    const [, d] = dashed[0] as [string, string];
    const [y1, y2] = [...d.matchAll(/,([\d.]+)/g)].map((m) => Number(m[1]));
    expect(y2).toBeLessThan(y1 as number);
    expect(svg).toContain(">total</text>");
    expect(svg).toContain(">outcome</text>");
    expect(svg).toContain(">-0.30</text>");
    // Circles mark the total only.
    expect(svg.match(/<circle /g)).toHaveLength(2);
  });

  it("draws no component lines for a single component (it is the total)", () => {
    const svg = rewardPlotSvg([{ iteration: 1, meanReward: 0.5, components: { outcome: 0.5 } }]);
    expect(svg).not.toContain("stroke-dasharray");
    expect(svg).not.toContain(">total</text>");
  });

  it("draws a sparkline over the values' own range", () => {
    expect(sparkline([0, 0.5, 1])).toBe("▁▅█");
    expect(sparkline([-1, 0, 1])).toBe("▁▅█");
    expect(sparkline([0.2, 0.2])).toBe("▁▁");
    expect(sparkline([])).toBe("");
  });
});
