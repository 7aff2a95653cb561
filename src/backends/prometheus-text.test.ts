import { describe, expect, it } from "vitest";
import { firstPresent, meanOf, parsePrometheusText, sumOf } from "./prometheus-text.js";

describe("parsePrometheusText", () => {
  it("reads names, escaped labels and special values; skips comments and junk", () => {
    const s = parsePrometheusText(
      [
        "# HELP a_total x",
        'a_total{k="v",path="C:\\\\x",q="say \\"hi\\"",nl="1\\n2"} 3 1700000000',
        "b NaN",
        'c{le="+Inf"} +Inf',
        "d -1.5e-3",
        "not a metric line {",
        'e{k="unterminated} 1',
      ].join("\n"),
    );
    expect(s[0]).toEqual({ name: "a_total", labels: { k: "v", path: "C:\\x", q: 'say "hi"', nl: "1\n2" }, value: 3 });
    expect(Number.isNaN(s[1]?.value)).toBe(true);
    expect(s[2]).toEqual({ name: "c", labels: { le: "+Inf" }, value: Infinity });
    expect(s[3]).toEqual({ name: "d", labels: {}, value: -0.0015 });
    expect(s).toHaveLength(4);
  });

  it("aggregates over label sets and falls back across renamed metrics", () => {
    const s = parsePrometheusText('r{rank="0"} 2\nr{rank="1"} 3\nu{rank="0"} 0.2\nu{rank="1"} 0.4\nn NaN');
    expect(sumOf(s, "r")).toBe(5);
    expect(meanOf(s, "u")).toBeCloseTo(0.3);
    expect(sumOf(s, "n")).toBeNull();
    expect(sumOf(s, "missing")).toBeNull();
    expect(firstPresent(s, ["new_name", "r"])).toBe(5);
  });
});
