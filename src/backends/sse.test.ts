import { describe, expect, it } from "vitest";
import { sseData } from "./sse.js";

function body(parts: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(enc.encode(p));
      c.close();
    },
  });
}

async function collect(parts: string[]): Promise<string[]> {
  const out: string[] = [];
  for await (const d of sseData(body(parts))) out.push(d);
  return out;
}

describe("sseData", () => {
  it("yields each event's data across chunk boundaries, CRLF and multi-line data", async () => {
    expect(await collect(['data: {"a"', ":1}\n", "\n: comment\n\nevent: x\r", "\ndata: l1\r\ndata:l2\r\n\r\n", "data: [DONE]"])).toEqual([
      '{"a":1}',
      "l1\nl2",
      "[DONE]",
    ]);
  });

  it("maps read errors through fail", async () => {
    const broken = new ReadableStream<Uint8Array>({
      start(c) {
        c.error(new Error("socket hang up"));
      },
    });
    const it = sseData(broken, (e) => new Error(`mapped: ${(e as Error).message}`));
    await expect(it.next()).rejects.toThrow("mapped: socket hang up");
  });

  it("ends the stream with a protocol error naming the backend when an event outgrows the bound", async () => {
    const out: string[] = [];
    const run = async (): Promise<void> => {
      for await (const d of sseData(body(["data: ok\n\n", `data: ${"x".repeat(40)}`, "x".repeat(40)]), undefined, { name: "e0", url: "http://e0", maxEventChars: 64 })) out.push(d);
    };
    await expect(run()).rejects.toThrow(/backend 'e0'.*over 64 characters/);
    expect(out).toEqual(["ok"]);
  });
});
