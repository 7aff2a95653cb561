// safetensors checkpoint I/O (F32 only): the trainer's checkpoint and export format.
// Layout: u64 LE header length, JSON header (space-padded to 8 bytes), then the raw tensor bytes.

import { readFileSync } from "node:fs";
import { endianness } from "node:os";
import { writeFileAtomic } from "./atomic-file.js";
import { numel, type Tensor } from "./weights.js";

/** Largest header accepted when reading, as in the reference implementation. */
const MAX_HEADER_BYTES = 100_000_000;

/**
 * Write tensors (in the given order) and optional string metadata as a safetensors file, via a
 * temporary file renamed into place.
 */
export function writeSafetensors(path: string, tensors: readonly Tensor[], metadata?: Record<string, string>): void {
  assertLittleEndian();
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== "string") throw new TypeError(`safetensors metadata ${k}: must be a string`);
    }
    header.__metadata__ = metadata;
  }
  let offset = 0;
  const seen = new Set<string>();
  for (const t of tensors) {
    if (t.name === "__metadata__" || seen.has(t.name)) throw new RangeError(`tensor ${t.name}: duplicate or reserved name`);
    if (t.shape.some((d) => !Number.isInteger(d) || d < 0)) throw new RangeError(`tensor ${t.name}: bad shape [${t.shape}]`);
    if (t.data.length !== numel(t.shape)) {
      throw new RangeError(`tensor ${t.name}: data has ${t.data.length} values, shape [${t.shape}] needs ${numel(t.shape)}`);
    }
    seen.add(t.name);
    header[t.name] = { dtype: "F32", shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  const jsonBytes = Buffer.byteLength(json, "utf8");
  json += " ".repeat((8 - ((8 + jsonBytes) % 8)) % 8);
  const headerBytes = Buffer.from(json, "utf8");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(headerBytes.byteLength));

  writeFileAtomic(path, (put) => {
    put(len);
    put(headerBytes);
    for (const t of tensors) put(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  });
}

/** Read a safetensors file of F32 tensors; tensors come back in file-offset order. */
export function readSafetensors(path: string): { tensors: Tensor[]; metadata: Record<string, string> } {
  assertLittleEndian();
  const buf = readFileSync(path);
  if (buf.byteLength < 8) throw new Error(`${path}: truncated safetensors file (${buf.byteLength} bytes, no header length)`);
  const headerLen = buf.readBigUInt64LE(0);
  if (headerLen > BigInt(MAX_HEADER_BYTES)) throw new Error(`${path}: safetensors header length ${headerLen} is too large`);
  const dataStart = 8 + Number(headerLen);
  if (dataStart > buf.byteLength) {
    throw new Error(`${path}: truncated safetensors file: header needs ${headerLen} bytes, file has ${buf.byteLength - 8}`);
  }
  let header: unknown;
  try {
    header = JSON.parse(buf.subarray(8, dataStart).toString("utf8"));
  } catch (err) {
    throw new Error(`${path}: safetensors header is not valid JSON (${(err as Error).message})`, { cause: err });
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new Error(`${path}: safetensors header must be a JSON object`);
  }
  const dataLen = buf.byteLength - dataStart;
  let metadata: Record<string, string> = {};
  const entries: { name: string; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (typeof raw !== "object" || raw === null || Object.values(raw).some((v) => typeof v !== "string")) {
        throw new Error(`${path}: __metadata__ must map strings to strings`);
      }
      metadata = raw as Record<string, string>;
      continue;
    }
    const info = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (info?.dtype !== "F32") throw new Error(`${path}: tensor ${name} has dtype ${String(info?.dtype)}; only F32 is supported`);
    const shape = info.shape;
    const offs = info.data_offsets;
    if (!Array.isArray(shape) || shape.some((d) => !Number.isInteger(d) || d < 0)) {
      throw new Error(`${path}: tensor ${name} has a bad shape`);
    }
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isInteger(o) && o >= 0) || offs[0] > offs[1]) {
      throw new Error(`${path}: tensor ${name} has bad data_offsets`);
    }
    const [begin, end] = offs as [number, number];
    if (end - begin !== numel(shape as number[]) * 4) {
      throw new Error(`${path}: tensor ${name}: data_offsets span ${end - begin} bytes, shape [${shape}] needs ${numel(shape as number[]) * 4}`);
    }
    if (end > dataLen) {
      throw new Error(`${path}: truncated safetensors file: tensor ${name} ends at data byte ${end}, file has ${dataLen}`);
    }
    entries.push({ name, shape: shape as number[], begin, end });
  }
  entries.sort((a, b) => a.begin - b.begin);
  const tensors = entries.map(({ name, shape, begin, end }) => ({
    name,
    shape,
    // Copy: the file buffer's offsets need not be 4-byte aligned.
    data: new Float32Array(buf.buffer.slice(buf.byteOffset + dataStart + begin, buf.byteOffset + dataStart + end)),
  }));
  return { tensors, metadata };
}

function assertLittleEndian(): void {
  if (endianness() !== "LE") throw new Error("safetensors I/O needs a little-endian machine");
}
