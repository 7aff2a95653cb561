import { describe, expect, it } from "vitest";
import { SseSplitter } from "./sse-splitter.js";

/** Push `stream` cut into pieces of `size` characters; what came out. */
function split(stream: string, size: number, maxEventChars?: number): { data: string[]; oversized: number } {
  const data: string[] = [];
  let oversized = 0;
  const s = new SseSplitter({ maxEventChars, onData: (d) => data.push(d), onOversized: () => oversized++ });
  for (let i = 0; i < stream.length; i += size) s.push(stream.slice(i, i + size));
  s.end();
  return { data, oversized };
}

describe("SseSplitter", () => {
  const stream = 'data: {"a":1}\n\n: comment\nevent: x\nid: 7\ndata: line1\ndata:line2\n\nretry: 10\n\ndata: [DONE]\n\n';

  it("yields each event's data, whatever the chunking and line endings", () => {
    const want = ['{"a":1}', "line1\nline2", "[DONE]"];
    for (const size of [1, 2, 3, 7, 1000]) {
      expect(split(stream, size).data).toEqual(want);
      expect(split(stream.replace(/\n/g, "\r\n"), size).data).toEqual(want);
      expect(split(stream.replace(/\n/g, "\r"), size).data).toEqual(want);
    }
  });

  it("counts a last event that the stream ended without its blank line", () => {
    expect(split("data: a\n\ndata: b", 3).data).toEqual(["a", "b"]);
    expect(split("data: a\n\ndata: b\n", 3).data).toEqual(["a", "b"]);
  });

  it("drops an event over the bound, then reads the next one, whatever the chunking", () => {
    const big = `data: ${"x".repeat(300)}\ndata: more\n\ndata: ok\n\n`;
    for (const size of [1, 5, 64, 10_000]) {
      expect(split(big, size, 100)).toEqual({ data: ["ok"], oversized: 1 });
      expect(split(big.replace(/\n/g, "\r\n"), size, 100)).toEqual({ data: ["ok"], oversized: 1 });
    }
    // An endless line: dropped, nothing else comes, nothing is kept.
    expect(split(`data: ${"y".repeat(1000)}`, 50, 100)).toEqual({ data: [], oversized: 1 });
  });

  it("lets onOversized end the push by throwing", () => {
    const s = new SseSplitter({
      maxEventChars: 10,
      onData: () => undefined,
      onOversized: (max) => {
        throw new Error(`over ${max}`);
      },
    });
    expect(() => s.push(`data: ${"z".repeat(20)}`)).toThrow("over 10");
  });
});
