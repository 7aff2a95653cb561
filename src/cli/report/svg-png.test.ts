// Rasterizing with and without a font file: the PNG has the asked width either way, and without one the warning
// names where fonts were looked for.
import { PNG } from "pngjs";
import { describe, expect, it } from "vitest";
import { svgToPng } from "./svg-png.js";

const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><rect x="10" y="10" width="80" height="40" fill="#d62728"/><text x="100" y="60" font-family="sans-serif" font-size="20">tail</text></svg>';

describe("svgToPng", () => {
  it("draws at the asked width, height in proportion, with the first font file found", () => {
    const r = svgToPng(svg, 400, [{ path: "/nonexistent/font.ttf", family: "X" }, { path: "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", family: "DejaVu Sans" }]);
    const png = PNG.sync.read(r.png);
    expect([png.width, png.height]).toEqual([400, 200]);
    // The red rectangle, scaled ×2: the pixel at (100, 50) is red.
    const i = (50 * png.width + 100) * 4;
    expect([png.data[i], png.data[i + 1], png.data[i + 2]]).toEqual([214, 39, 40]);
    if (r.font !== "system fonts") expect(r.warning).toBeUndefined();
  });

  it("without a font file still writes the PNG and says where it looked", () => {
    const r = svgToPng(svg, 200, [{ path: "/nonexistent/font.ttf", family: "X" }]);
    expect(PNG.sync.read(r.png).width).toBe(200);
    expect(r.font).toBe("system fonts");
    expect(r.warning).toMatch(/no font file found at \/nonexistent\/font\.ttf; /);
  });
});
