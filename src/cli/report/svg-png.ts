// An SVG rasterized to PNG with resvg (@resvg/resvg-js, Rust, no browser). resvg draws text only with a font it
// has loaded, so the first font file found among common system locations is loaded and made the `sans-serif`
// family the plots ask for; with none, system fonts are scanned instead, and when that finds none either the
// PNG is still written (lines and shapes) and the warning says its labels are missing.
import { existsSync } from "node:fs";
import { Resvg } from "@resvg/resvg-js";

/** Font files tried in order (Debian/Ubuntu, Fedora, Arch, Alpine, macOS, Windows). */
const FONT_CANDIDATES: readonly { path: string; family: string }[] = [
  { path: "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", family: "DejaVu Sans" },
  { path: "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf", family: "DejaVu Sans" },
  { path: "/usr/share/fonts/TTF/DejaVuSans.ttf", family: "DejaVu Sans" },
  { path: "/usr/share/fonts/dejavu/DejaVuSans.ttf", family: "DejaVu Sans" },
  { path: "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf", family: "Liberation Sans" },
  { path: "/System/Library/Fonts/Supplemental/Arial.ttf", family: "Arial" },
  { path: "/Library/Fonts/Arial.ttf", family: "Arial" },
  { path: "C:\\Windows\\Fonts\\arial.ttf", family: "Arial" },
];

/** A rendered PNG, and why its text may be missing. */
export interface PngResult {
  png: Buffer;
  /** The font the text was drawn with (a file path), or "system fonts". */
  font: string;
  warning?: string;
}

/** Rasterize `svg` at `width` pixels wide (height in proportion), on white. */
export function svgToPng(svg: string, width: number, candidates: readonly { path: string; family: string }[] = FONT_CANDIDATES): PngResult {
  const found = candidates.find((c) => existsSync(c.path));
  const font = found
    ? { loadSystemFonts: false, fontFiles: [found.path], defaultFontFamily: found.family, sansSerifFamily: found.family }
    : { loadSystemFonts: true };
  const resvg = new Resvg(svg, { background: "white", fitTo: { mode: "width", value: width }, font });
  const png = resvg.render().asPng();
  if (found) return { png, font: found.path };
  // No known file: whatever the system scan found. An SVG with text but no font renders without its labels.
  return { png, font: "system fonts", warning: `no font file found at ${candidates.map((c) => c.path).join(", ")}; the PNG's labels use system fonts and are missing if there are none` };
}
