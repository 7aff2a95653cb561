// Writes a SimReport's files into a folder: `report.json` (stable key order), `report.html` (self-contained, the
// plots as inline SVG) and `key-plot.png`, the completion CDF with the tail marked. That plot is the key one
// because it carries both headline figures the papers compare (Seer's iteration time is where the curve reaches
// 100%, its tail is the shaded last 10%), for every system on one axis; throughput over time is noisier and
// its gain is already the speedup row of the summary. `arbor sim` and `arbor report` both write through here.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { SimReport } from "../../sim/scenario/sim-report.js";
import { reportCharts } from "./report-charts.js";
import { simReportHtml, type RenderedChart } from "./sim-report-html.js";
import { simReportJson } from "./sim-report-json.js";
import { svgToPng } from "./svg-png.js";
import { vegaLiteSvg } from "./vega-svg.js";

/** Id of the plot written as `key-plot.png`. */
export const KEY_PLOT = "completion-cdf";
/** Width of `key-plot.png`, pixels (twice the SVG's, so it stays sharp on a slide). */
const PNG_WIDTH = 1400;

/** Options of {@link writeSimReportFiles}. */
export interface WriteReportOptions {
  /** Called with a warning that does not stop the report (a PNG drawn without a font). */
  warn?: (line: string) => void;
}

/** Write `report.json`, `report.html` and `key-plot.png` into `outDir` (created); returns the paths written. */
export async function writeSimReportFiles(report: SimReport, outDir: string, o: WriteReportOptions = {}): Promise<string[]> {
  const { charts, notes } = reportCharts(report);
  const rendered: RenderedChart[] = [];
  for (const c of charts) rendered.push({ id: c.id, title: c.title, svg: await vegaLiteSvg(c.spec) });
  const key = rendered.find((c) => c.id === KEY_PLOT);
  if (!key) throw new Error(`report: the ${KEY_PLOT} plot was not drawn`); // reportCharts always draws it
  const png = svgToPng(key.svg, PNG_WIDTH);
  if (png.warning) o.warn?.(`report: ${png.warning}`);
  await mkdir(outDir, { recursive: true });
  const files: [string, string | Buffer][] = [
    ["report.json", simReportJson(report)],
    ["report.html", simReportHtml(report, rendered, notes)],
    ["key-plot.png", png.png],
  ];
  const paths: string[] = [];
  for (const [name, data] of files) {
    const path = join(outDir, name);
    await writeFile(path, data);
    paths.push(path);
  }
  return paths;
}
