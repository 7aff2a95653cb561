import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { writeJsonLine } from "./gateway-bench-child.js";

/** A sink that takes one small chunk at a time, late: a pipe whose reader is busy (the gateway process). */
function slowSink(): { sink: Writable; received: () => string } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _enc, done) {
      setTimeout(() => {
        chunks.push(chunk);
        done();
      }, 2);
    },
  });
  return { sink, received: () => Buffer.concat(chunks).toString("utf8") };
}

describe("gateway bench child output", () => {
  it("resolves only once a results line far larger than a pipe's buffer has been taken whole", async () => {
    const { sink, received } = slowSink();
    // The full bench's line: 20,000 latencies (~400 kB; a Linux pipe holds 64 kB).
    const value = { results: [{ name: "d", latenciesMs: Array.from({ length: 20_000 }, (_, i) => i + 0.123456789) }] };
    const line = `${JSON.stringify(value)}\n`;
    expect(line.length).toBeGreaterThan(64 * 1024);
    const written = writeJsonLine(sink, value);
    // write() returned with the line still queued: exiting here would have cut it off.
    expect(received().length).toBeLessThan(line.length);
    await written;
    expect(received()).toBe(line);
    expect(JSON.parse(received())).toEqual(value);
  });

  it("rejects when the stream fails", async () => {
    const sink = new Writable({
      write(_chunk, _enc, done) {
        done(new Error("EPIPE"));
      },
    });
    sink.on("error", () => undefined);
    await expect(writeJsonLine(sink, { x: 1 })).rejects.toThrow(/EPIPE/);
  });
});
