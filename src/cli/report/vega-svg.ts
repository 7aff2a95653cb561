// A Vega-Lite specification rendered to an SVG string in Node: compiled by vega-lite, run by a headless vega View
// (renderer "none": no canvas, no DOM) and serialized with view.toSVG(). The data are inline and the loader is
// never asked for a URL, so the SVG depends on nothing outside the spec.
import { parse, View } from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** The SVG of `spec` (white background, padding 8). */
export async function vegaLiteSvg(spec: TopLevelSpec): Promise<string> {
  const compiled = compile({ background: "white", padding: 8, ...spec } as TopLevelSpec).spec;
  const view = new View(parse(compiled), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
