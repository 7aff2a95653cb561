// The report files of a SimReport built here (two systems, a few points each): the JSON reads back to the same
// report and the same bytes, the HTML holds every plot with its axis titles, both systems, the tail marker and the
// summary's ratios and sources and fetches nothing, and the PNG decodes to an image of the key plot's size.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PNG } from "pngjs";
import { afterAll, describe, expect, it } from "vitest";
import { SIM_REPORT_FORMAT, type SimReport, type SimSystemResult } from "../../sim/scenario/sim-report.js";
import { parseSimReport } from "./read-sim-report.js";
import { sameLines } from "./report-charts.js";
import { simReportJson } from "./sim-report-json.js";
import { writeSimReportFiles } from "./write-sim-report-files.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-sim-report-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A system whose requests end uniformly over [0, lastMs] but for a tail stretched to `lastMs`. */
function system(name: string, lastMs: number, opts: { staleness?: boolean; kv?: boolean } = {}): SimSystemResult {
  const pct = Array.from({ length: 101 }, (_, i) => (i <= 90 ? (i / 90) * lastMs * 0.5 : lastMs * 0.5 + ((i - 90) / 10) * lastMs * 0.5));
  const pts = (f: (k: number) => number) => [0, 1, 2, 3, 4].map((k) => ({ tMs: k * 1000, value: f(k) }));
  return {
    system: name,
    description: `${name}: test system`,
    summary: {
      requests: 100,
      completed: 98,
      aborted: 2,
      programs: 10,
      makespanMs: lastMs,
      iterationMs: lastMs,
      outputTokens: 50_000,
      throughputTokensPerS: 50_000 / (lastMs / 1000),
      stepsPerMin: 6000 / (lastMs / 1000),
      tailMs: pct[100]! - pct[90]!,
      p50Ms: pct[50]!,
      p90Ms: pct[90]!,
      p99Ms: pct[99]!,
      preemptions: 3,
      recomputedTokens: 1200,
      peakKvUsage: 0.9,
      meanStaleness: opts.staleness ? 0.5 : 0,
    },
    series: {
      throughput: pts((k) => 10_000 + 1000 * k),
      kvUsage: opts.kv === false ? {} : { "engine-1": pts((k) => k / 5), "engine-0": pts((k) => k / 6) },
      preemptions: pts((k) => k),
      recomputedTokens: pts((k) => 300 * k),
      staleness: opts.staleness ? pts(() => 0.5) : [],
    },
    completionPercentilesMs: pct,
  };
}

/** `x` with the keys of every object in reverse order. */
function reverseKeys(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(reverseKeys);
  if (typeof x !== "object" || x === null) return x;
  return Object.fromEntries(Object.entries(x).reverse().map(([k, v]) => [k, reverseKeys(v)]));
}

function fixture(): SimReport {
  const base = system("verl-like", 8000);
  const seer = system("seer", 5000, { staleness: true });
  return {
    format: SIM_REPORT_FORMAT,
    workload: { name: "tiny-rollout", kind: "rollout", description: "a test <workload> & more", sources: ["Seer (arXiv 2511.14617), Table 3"], scale: { gpus: 8, groupSize: 4, profile: "qwen2-7b" } },
    seed: 7,
    baseline: "verl-like",
    systems: [base, seer],
    ratios: [
      { system: "verl-like", speedup: 1, throughput: 1, tailReduction: 0 },
      { system: "seer", speedup: 1.6, throughput: 1.6, tailReduction: 0.375 },
    ],
  };
}

describe("writeSimReportFiles", () => {
  it("writes report.json, report.html and key-plot.png and returns their paths", async () => {
    const out = join(dir, "a");
    const paths = await writeSimReportFiles(fixture(), out);
    expect(paths).toEqual([join(out, "report.json"), join(out, "report.html"), join(out, "key-plot.png")]);
  });

  it("report.json: format first, declared key order whatever the object's, and it reads back to the same bytes", async () => {
    const r = fixture();
    // The same report with every object's keys set in the reverse order gives the same text.
    const reversed = reverseKeys(r) as SimReport;
    expect(Object.keys(reversed)[0]).toBe("ratios");
    expect(simReportJson(reversed)).toBe(simReportJson(r));
    const out = join(dir, "b");
    await writeSimReportFiles(reversed, out);
    const text = readFileSync(join(out, "report.json"), "utf8");
    expect(text.startsWith(`{\n  "format": "${SIM_REPORT_FORMAT}",\n  "workload": {\n    "name": "tiny-rollout",`)).toBe(true);
    // Engine names are sorted: engine-0 before engine-1 though the fixture set them the other way round.
    expect(text.indexOf('"engine-0"')).toBeLessThan(text.indexOf('"engine-1"'));
    expect(parseSimReport(text, "report.json")).toEqual(r);
    expect(simReportJson(parseSimReport(text, "report.json"))).toBe(text);
  });

  it("report.html: every plot as inline SVG with axis titles, both systems, the tail marked, the summary and sources", async () => {
    const out = join(dir, "c");
    await writeSimReportFiles(fixture(), out);
    const html = readFileSync(join(out, "report.html"), "utf8");
    const svgs = html.match(/<svg[\s\S]*?<\/svg>/g) ?? [];
    // throughput, KV small multiples, completion CDF, preemptions/recomputed, staleness (seer has some).
    expect(svgs).toHaveLength(5);
    for (const id of ["throughput", "kv-usage", "completion-cdf", "preemptions", "staleness"]) expect(html).toContain(`<figure id="${id}"`);
    for (const title of ["time since start (s)", "throughput (output tokens/s)", "KV blocks in use (% of capacity)", "fraction of requests completed", "preemptions (count, cumulative)", "recomputed tokens (cumulative)", "mean staleness (policy versions)"]) {
      expect(html, title).toContain(`>${title}</text>`);
    }
    const cdf = svgs.find((x) => x.includes("Completion CDF")) ?? "";
    expect(cdf).toContain(">tail: last 10% of requests</text>");
    // Both systems in the legend of the CDF, and one dashed 90th-percentile rule per system.
    expect(cdf).toContain(">verl-like</text>");
    expect(cdf).toContain(">seer</text>");
    expect(cdf.match(/stroke-dasharray="4,3"/g)?.length ?? 0).toBeGreaterThanOrEqual(2);
    // The KV panels: one per system, each with its engines.
    const kv = svgs.find((x) => x.includes("KV-cache usage")) ?? "";
    expect(kv).toContain(">engine-0</text>");
    // Summary: the ratios against the baseline and the workload's scale and sources, escaped.
    expect(html).toContain("<td>speedup vs verl-like (iteration time, ×)</td><td>1×</td><td class=\"better\">1.6×</td>");
    expect(html).toContain("<td>tail reduction vs verl-like (%)</td><td>0%</td><td class=\"better\">37.5%</td>");
    expect(html).toContain("<li>Seer (arXiv 2511.14617), Table 3</li>");
    expect(html).toContain("a test &lt;workload&gt; &amp; more");
    expect(html).toContain("<td>profile</td><td>qwen2-7b</td>");
    // Self-contained: no script and nothing fetched.
    expect(html).not.toMatch(/<script|<link|@import/i);
    expect(html).not.toMatch(/(src|href)\s*=\s*["']?(https?:)?\/\//i);
    expect(html).not.toMatch(/url\(/i);
  });

  it("names the systems whose lines are the same, which one line draws", async () => {
    const r = fixture();
    const twin = { ...system("sglang-router", 8000), series: { ...system("sglang-router", 8000).series, throughput: system("verl-like", 8000).series.throughput.map((p) => ({ ...p, value: p.value + 1 })) } };
    r.systems = [r.systems[0]!, twin, r.systems[1]!];
    const out = join(dir, "same");
    await writeSimReportFiles(r, out);
    const svgs = readFileSync(join(out, "report.html"), "utf8").match(/<svg[\s\S]*?<\/svg>/g) ?? [];
    const cdf = svgs.find((x) => x.includes("Completion CDF")) ?? "";
    // (The subtitle's second line: a tspan.)
    expect(cdf).toContain(">one line for verl-like and sglang-router (the same figures)</tspan>");
    // Their throughput differs (the fixture's verl-like and seer have the same one).
    const throughput = svgs.find((x) => x.includes("Throughput over time")) ?? "";
    expect(throughput).toContain(">one line for verl-like and seer (the same figures)</text>");
    expect(throughput).not.toContain("sglang-router (the same");
    expect(sameLines(fixture(), (s) => s.completionPercentilesMs)).toEqual([]);
  });

  it("leaves out plots without data and says so instead of drawing an empty frame", async () => {
    const r = fixture();
    r.systems = r.systems.map((s) => ({ ...s, summary: { ...s.summary, peakKvUsage: s.system === "seer" ? 0 : s.summary.peakKvUsage }, series: { ...s.series, kvUsage: s.system === "seer" ? {} : s.series.kvUsage, preemptions: [], recomputedTokens: [], staleness: [] } }));
    const out = join(dir, "d");
    await writeSimReportFiles(r, out);
    const html = readFileSync(join(out, "report.html"), "utf8");
    expect(html).not.toContain('<figure id="staleness"');
    expect(html).not.toContain('<figure id="preemptions"');
    expect(html).toContain('<figure id="kv-usage"');
    expect(html).toContain("KV usage per engine: not recorded for seer.");
    expect(html).toContain("Preemptions and recomputed tokens: no series recorded");
    // In the summary, figures without a series read "not recorded" rather than a measured 0.
    expect(html).toContain("<td>peak KV usage (% of capacity)</td><td>90</td><td>not recorded</td>");
    expect(html).toContain("<td>preemptions</td><td>3</td><td>3</td>");
  });

  it("key-plot.png is a valid PNG of the completion CDF at 1400 px wide", async () => {
    const out = join(dir, "e");
    await writeSimReportFiles(fixture(), out);
    const buf = readFileSync(join(out, "key-plot.png"));
    const png = PNG.sync.read(buf);
    expect(png.width).toBe(1400);
    expect(png.height).toBeGreaterThan(400);
    expect(png.height).toBeLessThan(1400);
    // Not blank: some pixels are neither white nor transparent (the lines, the shaded tail).
    let inked = 0;
    for (let i = 0; i < png.data.length; i += 4) if (png.data[i]! < 200 || png.data[i + 1]! < 200 || png.data[i + 2]! < 200) inked++;
    expect(inked).toBeGreaterThan(1000);
  });

  it("the same report gives byte-identical files", async () => {
    await writeSimReportFiles(fixture(), join(dir, "f1"));
    await writeSimReportFiles(fixture(), join(dir, "f2"));
    for (const f of ["report.json", "report.html", "key-plot.png"]) expect(readFileSync(join(dir, "f1", f)).equals(readFileSync(join(dir, "f2", f))), f).toBe(true);
  });
});

describe("parseSimReport", () => {
  it("names the field and the reason of a bad report", () => {
    const r = JSON.parse(simReportJson(fixture())) as Record<string, unknown>;
    expect(() => parseSimReport("{", "x.json")).toThrow(/report: x\.json is not JSON/);
    expect(() => parseSimReport(JSON.stringify({ ...r, format: "other/1" }), "x.json")).toThrow(/format is "other\/1", expected "arbor-sim-report\/1"/);
    const bad = JSON.parse(JSON.stringify(r)) as SimReport;
    bad.systems[1]!.completionPercentilesMs = [1, 2];
    expect(() => parseSimReport(JSON.stringify(bad), "x.json")).toThrow(/field systems\.1\.completionPercentilesMs: /);
    expect(() => parseSimReport(JSON.stringify({ ...r, baseline: "nope" }), "x.json")).toThrow(/baseline "nope" is not one of the systems \(verl-like, seer\)/);
  });
});
