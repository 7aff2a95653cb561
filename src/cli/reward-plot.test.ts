import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { niceAxis, rewardPlotSvg, sparkline } from "./reward-plot.js";

/** y of each tick label, by label text (the labels right-aligned at the left edge of the frame). */
function tickLabels(svg: string): Map<string, number> {
  return new Map([...svg.matchAll(/<text x="48" y="([\d.-]+)" text-anchor="end">([^<]+)<\/text>/g)].map((m) => [m[2] as string, Number(m[1]) - 4]));
}

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
    expect([...tickLabels(svg).keys()]).toEqual(["-0.5", "0.0", "0.5", "1.0", "1.5"]);
    expect(svg).toContain("a &lt; b &amp; c");
  });

  it("scales the y-axis to the data: a curve between −0.2 and 0 fills the frame, with round ticks", () => {
    const svg = rewardPlotSvg([-0.2, -0.09, -0.02, 0].map((r, i) => ({ iteration: i + 1, meanReward: r })));
    const ticks = tickLabels(svg);
    expect([...ticks.keys()]).toEqual(["-0.20", "-0.15", "-0.10", "-0.05", "0.00"]);
    const cy = [...svg.matchAll(/<circle cx="[\d.]+" cy="([\d.]+)"/g)].map((m) => Number(m[1]));
    // The frame is y 40..312: the lowest point on its bottom edge, the highest on its top edge.
    expect(Math.max(...cy)).toBeCloseTo(312, 1);
    expect(Math.min(...cy)).toBeCloseTo(40, 1);
    expect(ticks.get("0.00")).toBeCloseTo(40, 1);
  });

  it("niceAxis: ticks are whole multiples of a 1/2/5 × 10^k step that cover the data in 2–8 intervals", () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: -1e4, max: 1e4, noNaN: true }), { minLength: 1, maxLength: 20 }), (values) => {
        const a = niceAxis(values);
        const mantissa = a.step / 10 ** Math.floor(Math.log10(a.step) + 1e-9);
        expect([1, 2, 5].some((d) => Math.abs(mantissa - d) < 1e-6)).toBe(true);
        expect(a.lo).toBeLessThanOrEqual(Math.min(...values) + 1e-9 * a.step);
        expect(a.hi).toBeGreaterThanOrEqual(Math.max(...values) - 1e-9 * a.step);
        expect(a.ticks.length - 1).toBeGreaterThanOrEqual(2);
        expect(a.ticks.length - 1).toBeLessThanOrEqual(8);
        for (const t of a.ticks) expect(Math.abs(t / a.step - Math.round(t / a.step))).toBeLessThan(1e-6);
        // The labels print the ticks exactly at the chosen precision (no 0.30000000000000004).
        for (const t of a.ticks) expect(Number(t.toFixed(a.decimals))).toBe(t);
      }),
    );
    expect(niceAxis([0.25, 0.25])).toMatchObject({ step: 0.02, ticks: [0.2, 0.22, 0.24, 0.26, 0.28, 0.3] });
    // Two values a few ulps apart at 1e4: padded like equal values, not split into ticks finer than the floats.
    expect(niceAxis([9999.999999999998, 10000]).ticks).toEqual([9000, 9500, 10000, 10500, 11000]);
    expect(niceAxis([0, 0.5, 1]).ticks).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceAxis([-0.203, -0.094, -0.016, 0])).toMatchObject({ step: 0.05, ticks: [-0.25, -0.2, -0.15, -0.1, -0.05, 0] });
  });

  it("keeps the last point's label inside the frame (anchored to its left) and a top point's label below it", () => {
    const svg = rewardPlotSvg([{ iteration: 1, meanReward: 0.1 }, { iteration: 2, meanReward: 0.3 }, { iteration: 3, meanReward: 0.9 }]);
    const labels = [...svg.matchAll(/<text x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)" fill="#1f77b4">([^<]+)<\/text>/g)].map((m) => ({ x: Number(m[1]), y: Number(m[2]), anchor: m[3], text: m[4] as string }));
    expect(labels.map((l) => l.text)).toEqual(["0.10", "0.30", "0.90"]);
    const last = labels[2]!;
    // Frame: x 56..616, y 40..312; a label is about 7 px per character wide and 12 px tall.
    expect(last.anchor).toBe("end");
    expect(last.x).toBeLessThanOrEqual(616);
    expect(last.x - 7 * last.text.length).toBeGreaterThanOrEqual(56);
    expect(last.y - 12).toBeGreaterThanOrEqual(40);
    expect(labels[0]!.anchor).toBe("start");
    expect(labels[0]!.x).toBeGreaterThanOrEqual(56);
    for (const l of labels) expect(l.y).toBeLessThanOrEqual(312);
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
    // The axis fits the components too: process reaches −0.3.
    expect([...tickLabels(svg).keys()]).toEqual(["-0.4", "-0.2", "0.0", "0.2", "0.4", "0.6"]);
    // Circles mark the total only.
    expect(svg.match(/<circle /g)).toHaveLength(2);
    // The legend sits under the frame (y 40..312) and the "iteration" title, never over the data, and the
    // picture grows to hold it.
    const legendYs = [...svg.matchAll(/<text x="[\d.]+" y="([\d.]+)">(total|outcome|process)<\/text>/g)].map((m) => Number(m[1]));
    expect(legendYs).toHaveLength(3);
    for (const ly of legendYs) expect(ly - 12).toBeGreaterThan(350);
    const height = Number(svg.match(/height="(\d+)"/)?.[1]);
    expect(Math.max(...legendYs)).toBeLessThanOrEqual(height);
  });

  it("wraps a long legend into rows inside the picture's width", () => {
    const components = Object.fromEntries(Array.from({ length: 8 }, (_, k) => [`a-long-component-name-${k}`, k / 10]));
    const svg = rewardPlotSvg([{ iteration: 1, meanReward: 0.3, components }, { iteration: 2, meanReward: 0.4, components }]);
    const entries = [...svg.matchAll(/<text x="([\d.]+)" y="([\d.]+)">(total|a-long[^<]+)<\/text>/g)].map((m) => ({ x: Number(m[1]), y: Number(m[2]), text: m[3] as string }));
    expect(entries).toHaveLength(9);
    expect(new Set(entries.map((e) => e.y)).size).toBeGreaterThan(1);
    const height = Number(svg.match(/height="(\d+)"/)?.[1]);
    for (const e of entries) {
      expect(e.x + 7 * e.text.length).toBeLessThanOrEqual(640);
      expect(e.y).toBeLessThanOrEqual(height);
    }
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

  it("draws the held-out solved rate per version with ±1 SE bars, version 0 at iteration 0", () => {
    const svg = rewardPlotSvg(
      [
        { iteration: 1, meanReward: 0.1 },
        { iteration: 2, meanReward: 0.2 },
      ],
      undefined,
      [
        { iteration: 0, version: 0, solved: 0.2, se: 0.05 },
        { iteration: 2, version: 2, solved: 0.4, se: 0.1 },
      ],
    );
    expect(svg).toContain("mean reward and held-out solved rate per iteration");
    expect(svg).toContain("held-out solved (±1 SE)");
    expect(svg).toContain("held-out v2: 40.0% ± 10.0");
    // The axis covers every bar's ends (0.15 .. 0.5) and the x axis starts at iteration 0.
    const ticks = [...tickLabels(svg).keys()].map(Number);
    expect(Math.min(...ticks)).toBeLessThanOrEqual(0.1);
    expect(Math.max(...ticks)).toBeGreaterThanOrEqual(0.5);
    expect(svg).toMatch(/text-anchor="middle">0<\/text>/);
    // One vertical bar per version, its length twice the SE on the axis' scale: v2's twice v0's.
    const bars = [...svg.matchAll(/<line x1="([\d.]+)" y1="([\d.]+)" x2="\1" y2="([\d.]+)" stroke="#17becf"/g)].map((m) => Number(m[3]) - Number(m[2]));
    expect(bars).toHaveLength(2);
    expect(bars[1]! / bars[0]!).toBeCloseTo(2, 1);
    // Higher rate higher up: the markers' y falls from v0 to v2.
    const marks = [...svg.matchAll(/<rect x="[\d.]+" y="([\d.]+)" width="7"/g)].map((m) => Number(m[1]));
    expect(marks[0]!).toBeGreaterThan(marks[1]!);
    // Without held-out points the plot is as before.
    expect(rewardPlotSvg([{ iteration: 1, meanReward: 0.1 }])).not.toContain("held-out");
  });
});
