// A reader of the Prometheus text exposition format, enough to pull engine gauges, counters and
// info-style label sets (vllm:cache_config_info) out of a /metrics page.

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parse every sample line of a /metrics page; comments and malformed lines are skipped. */
export function parsePrometheusText(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const s = parseLine(line);
    if (s) out.push(s);
  }
  return out;
}

function parseLine(line: string): PromSample | undefined {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (!m?.[1]) return undefined;
  const name = m[1];
  let i = name.length;
  const labels: Record<string, string> = {};
  if (line[i] === "{") {
    i++;
    for (;;) {
      while (line[i] === " " || line[i] === ",") i++;
      if (line[i] === "}") {
        i++;
        break;
      }
      const k = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i));
      if (!k?.[0] || line[i + k[0].length] !== "=" || line[i + k[0].length + 1] !== '"') return undefined;
      i += k[0].length + 2;
      let v = "";
      while (i < line.length && line[i] !== '"') {
        if (line[i] === "\\" && i + 1 < line.length) {
          const c = line[i + 1];
          v += c === "n" ? "\n" : c;
          i += 2;
        } else v += line[i++];
      }
      if (line[i] !== '"') return undefined;
      i++;
      labels[k[0]] = v;
    }
  }
  const rest = line.slice(i).trim().split(/\s+/)[0];
  if (rest === undefined || rest === "") return undefined;
  const value = rest === "+Inf" ? Infinity : rest === "-Inf" ? -Infinity : Number(rest);
  if (Number.isNaN(value) && rest !== "NaN") return undefined;
  return { name, labels, value };
}

/** Sum of the finite samples named `name` (e.g. over model or dp-rank labels); null when absent. */
export function sumOf(samples: readonly PromSample[], name: string): number | null {
  const xs = samples.filter((s) => s.name === name && Number.isFinite(s.value));
  return xs.length ? xs.reduce((a, s) => a + s.value, 0) : null;
}

/** Mean of the finite samples named `name` (ratios across ranks); null when absent. */
export function meanOf(samples: readonly PromSample[], name: string): number | null {
  const xs = samples.filter((s) => s.name === name && Number.isFinite(s.value));
  return xs.length ? xs.reduce((a, s) => a + s.value, 0) / xs.length : null;
}

/** The first of several metric names that is present (engines renamed metrics across versions). */
export function firstPresent(samples: readonly PromSample[], names: readonly string[], agg = sumOf): number | null {
  for (const n of names) {
    const v = agg(samples, n);
    if (v !== null) return v;
  }
  return null;
}
