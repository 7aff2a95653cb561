// TensorBoard event files (issue 19's run tracking), written in TensorFlow's documented format so that
// `tensorboard --logdir <run>/tensorboard` draws a run's curves: a file `events.out.tfevents.<sec>.<host>`
// of TFRecords (uint64 length, masked CRC-32C of it, the bytes, their masked CRC-32C), each an `Event`
// protobuf (tensorflow/core/util/event.proto: wall_time 1, step 2, file_version 3, summary 5) whose
// `Summary` holds scalar values (summary.proto: Value.tag 1, Value.simple_value 2). The first event
// names the format version ("brain.Event:2"), as TensorFlow's writers do. Protobuf encoding through
// protobufjs, CRC-32C through @node-rs/crc32.
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { crc32c } from "@node-rs/crc32";
import protobuf from "protobufjs";
import type { Clock } from "../core/clock.js";

/** The two messages of event.proto and summary.proto a scalar needs (the other fields are never written). */
const root = protobuf.Root.fromJSON({
  nested: {
    tensorboard: {
      nested: {
        Event: {
          fields: {
            wallTime: { type: "double", id: 1 },
            step: { type: "int64", id: 2 },
            fileVersion: { type: "string", id: 3 },
            summary: { type: "Summary", id: 5 },
          },
        },
        Summary: {
          fields: { value: { rule: "repeated", type: "Value", id: 1 } },
          nested: { Value: { fields: { tag: { type: "string", id: 1 }, simpleValue: { type: "float", id: 2 } } } },
        },
      },
    },
  },
});
/** The Event message type (exported for the tests that read event files back). */
export const TfEvent = root.lookupType("tensorboard.Event");

/** TFRecord's masked CRC-32C: rotated right by 15 bits, plus a constant. */
export function maskedCrc32c(data: Uint8Array): number {
  const crc = crc32c(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

/** One TFRecord around `data`. */
function record(data: Uint8Array): Buffer {
  const header = Buffer.alloc(8);
  header.writeBigUInt64LE(BigInt(data.length));
  const crcs = Buffer.alloc(8);
  crcs.writeUInt32LE(maskedCrc32c(header), 0);
  crcs.writeUInt32LE(maskedCrc32c(data), 4);
  return Buffer.concat([header, crcs.subarray(0, 4), data, crcs.subarray(4)]);
}

/** Appends scalar summaries to one event file in `dir`. */
export class TensorBoardWriter {
  readonly path: string;

  constructor(
    dir: string,
    private readonly clock: Clock,
    host = hostname(),
  ) {
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, `events.out.tfevents.${Math.floor(clock.now() / 1000)}.${host}`);
    writeFileSync(this.path, this.event({ fileVersion: "brain.Event:2" }));
  }

  /** Append one event at `step` holding every value of `scalars` (non-finite values are left out). */
  scalars(step: number, scalars: Readonly<Record<string, number>>): void {
    const value = Object.entries(scalars)
      .filter(([, v]) => Number.isFinite(v))
      .map(([tag, simpleValue]) => ({ tag, simpleValue }));
    if (value.length === 0) return;
    appendFileSync(this.path, this.event({ step, summary: { value } }));
  }

  private event(fields: Record<string, unknown>): Buffer {
    const msg = TfEvent.fromObject({ wallTime: this.clock.now() / 1000, ...fields });
    return record(TfEvent.encode(msg).finish());
  }
}
