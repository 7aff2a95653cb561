import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { readTfEvents } from "../testing/tfevents-reader.js";
import { maskedCrc32c, TensorBoardWriter } from "./tensorboard-events.js";

/** Worked by hand: (0xe3069283 rotated right by 15 bits) + 0xa282ead8, mod 2^32. */
const MASKED = 0xc78ab0e5;

describe("TensorBoard event files", () => {
  it("masks CRC-32C as TFRecord does: CRC-32C('123456789') = 0xe3069283, rotated right 15, plus 0xa282ead8", () => {
    expect(maskedCrc32c(Buffer.from("123456789"))).toBe(MASKED);
  });

  it("writes the version event, then one event per step with its scalars, framed and checksummed", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-tb-"));
    const clock = new VirtualClock(1_700_000_000_500);
    const w = new TensorBoardWriter(dir, clock, "host1");
    expect(basename(w.path)).toBe("events.out.tfevents.1700000000.host1");
    clock.advance(1500);
    w.scalars(1, { "reward/mean": 0.25, "train/loss": -1.5, skipped: NaN });
    w.scalars(2, { "reward/mean": 0.5 });
    w.scalars(3, { only: Infinity });
    const events = readTfEvents(w.path);
    expect(events).toEqual([
      { wallTime: 1_700_000_000.5, step: 0, fileVersion: "brain.Event:2", scalars: {} },
      { wallTime: 1_700_000_002, step: 1, scalars: { "reward/mean": 0.25, "train/loss": -1.5 } },
      { wallTime: 1_700_000_002, step: 2, scalars: { "reward/mean": 0.5 } },
    ]);
    // A flipped byte in the first record's data is caught by its CRC.
    const corrupt = Buffer.from(readFileSync(w.path));
    corrupt[20] = corrupt[20]! ^ 0xff;
    const bad = join(dir, "corrupt");
    writeFileSync(bad, corrupt);
    expect(() => readTfEvents(bad)).toThrow(/bad data CRC at byte 0/);
  });
});
