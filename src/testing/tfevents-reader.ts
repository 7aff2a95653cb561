// Test support: reads a TensorBoard event file back record by record, checking each TFRecord's length and
// data CRCs (masked CRC-32C), and decodes its Event, so tests can check what TensorBoard would draw.
import { readFileSync } from "node:fs";
import { maskedCrc32c, TfEvent } from "../loop/tensorboard-events.js";

export interface ReadEvent {
  wallTime: number;
  step: number;
  fileVersion?: string;
  /** tag → scalar value, for a summary event. */
  scalars: Record<string, number>;
}

/** Every event of the file at `path`; throws naming the offset of a record whose framing or CRC is wrong. */
export function readTfEvents(path: string): ReadEvent[] {
  const buf = readFileSync(path);
  const out: ReadEvent[] = [];
  for (let at = 0; at < buf.length; ) {
    const header = buf.subarray(at, at + 8);
    if (header.length < 8 || buf.length < at + 12) throw new Error(`${path}: truncated record header at byte ${at}`);
    if (buf.readUInt32LE(at + 8) !== maskedCrc32c(header)) throw new Error(`${path}: bad length CRC at byte ${at}`);
    const n = Number(header.readBigUInt64LE());
    const data = buf.subarray(at + 12, at + 12 + n);
    if (data.length < n || buf.length < at + 16 + n) throw new Error(`${path}: truncated record at byte ${at}`);
    if (buf.readUInt32LE(at + 12 + n) !== maskedCrc32c(data)) throw new Error(`${path}: bad data CRC at byte ${at}`);
    const e = TfEvent.toObject(TfEvent.decode(data), { longs: Number }) as { wallTime: number; step?: number; fileVersion?: string; summary?: { value?: { tag: string; simpleValue: number }[] } };
    out.push({
      wallTime: e.wallTime,
      step: e.step ?? 0,
      ...(e.fileVersion !== undefined ? { fileVersion: e.fileVersion } : {}),
      scalars: Object.fromEntries((e.summary?.value ?? []).map((v) => [v.tag, v.simpleValue])),
    });
    at += 16 + n;
  }
  return out;
}
