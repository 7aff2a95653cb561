// safetensors checkpoint I/O: the trainer's checkpoint and export format (huggingface/safetensors).
// Layout: u64 LE header length N, N bytes of JSON header (space-padded so N is a multiple of 8), then the
// byte buffer: every tensor's little-endian, row-major bytes at its `data_offsets` (relative to the buffer),
// with no holes. Writes F32 (`Tensor`, the model weights) and I32 (`IntTensor`); reads F32, F16 and BF16
// (as float32 `Tensor`s, widened exactly: Hugging Face checkpoints) and I32 and I64 (I64 comes back as
// an `IntTensor` when every value fits in int32). F32 and I32 are both 4 bytes wide,
// so with the 8-aligned buffer start every written tensor starts aligned to its element size.

import { closeSync, fstatSync, openSync } from "node:fs";
import { endianness } from "node:os";
import { writeFileAtomic } from "./atomic-file.js";
import { bf16ToF32, f16ToF32 } from "./half-float.js";
import { readAt } from "./read-at.js";
import { numel, type Tensor } from "./weights.js";

/** Largest header accepted when reading, as in the reference implementation. */
const MAX_HEADER_BYTES = 100_000_000;

/** One named tensor, row-major int32 (safetensors dtype I32). */
export type IntTensor = { name: string; shape: number[]; data: Int32Array };

/** A tensor this module writes or reads: F32 (`Tensor`) or I32 (`IntTensor`). */
export type AnyTensor = Tensor | IntTensor;

/** The safetensors dtypes this module reads, with their element sizes in bytes. */
const DTYPE_BYTES = { F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8 } as const;
type Dtype = keyof typeof DTYPE_BYTES;

/** Whether `t` holds int32 data (dtype I32). */
export function isIntTensor(t: AnyTensor): t is IntTensor {
  return t.data instanceof Int32Array;
}

function dtypeOf(t: AnyTensor): "F32" | "I32" {
  if (t.data instanceof Float32Array) return "F32";
  if (t.data instanceof Int32Array) return "I32";
  throw new TypeError(`tensor ${t.name}: data must be a Float32Array (F32) or an Int32Array (I32)`);
}

/**
 * The parts of a safetensors file holding `tensors` (in the given order) and optional string metadata: the
 * header length, the header, then each tensor's bytes (views of the tensors' own data, not copies).
 * Float32Array data is stored as F32, Int32Array data as I32.
 */
function safetensorsParts(tensors: readonly AnyTensor[], metadata?: Record<string, string>): Uint8Array[] {
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
    const dtype = dtypeOf(t);
    if (t.data.length !== numel(t.shape)) {
      throw new RangeError(`tensor ${t.name}: data has ${t.data.length} values, shape [${t.shape}] needs ${numel(t.shape)}`);
    }
    seen.add(t.name);
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  const jsonBytes = Buffer.byteLength(json, "utf8");
  json += " ".repeat((8 - (jsonBytes % 8)) % 8);
  const headerBytes = Buffer.from(json, "utf8");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(headerBytes.byteLength));
  return [len, headerBytes, ...tensors.map((t) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength))];
}

/**
 * Write tensors (in the given order) and optional string metadata as a safetensors file, via a
 * temporary file renamed into place. Float32Array data is stored as F32, Int32Array data as I32.
 */
export function writeSafetensors(path: string, tensors: readonly AnyTensor[], metadata?: Record<string, string>): void {
  const parts = safetensorsParts(tensors, metadata);
  // Streamed part by part: a checkpoint may be larger than one Buffer.
  writeFileAtomic(path, (put) => {
    for (const p of parts) put(p);
  });
}

/** The same file as {@link writeSafetensors} writes, in memory (for small files served over HTTP). */
export function safetensorsBytes(tensors: readonly AnyTensor[], metadata?: Record<string, string>): Uint8Array {
  return Buffer.concat(safetensorsParts(tensors, metadata));
}

/**
 * Read a safetensors file of F32, F16, BF16, I32 and I64 tensors; tensors come back in file-offset
 * order, F32 as `Tensor`, F16 and BF16 as float32 `Tensor`s (exact), I32 and I64 as `IntTensor` (an
 * I64 value outside the int32 range is an error). `dtypes` gives each tensor's stored dtype.
 */
export function readSafetensors(path: string): { tensors: AnyTensor[]; metadata: Record<string, string>; dtypes: Map<string, string> } {
  assertLittleEndian();
  // Read through a file descriptor, tensor by tensor: checkpoints are often larger than one Buffer
  // (readFileSync stops at 2 GiB), and each tensor gets its own aligned copy anyway.
  const fd = openSync(path, "r");
  try {
    return readSafetensorsFd(fd, path);
  } finally {
    closeSync(fd);
  }
}

function readSafetensorsFd(fd: number, path: string): { tensors: AnyTensor[]; metadata: Record<string, string>; dtypes: Map<string, string> } {
  const fileSize = fstatSync(fd).size;
  if (fileSize < 8) throw new Error(`${path}: truncated safetensors file (${fileSize} bytes, no header length)`);
  const headerLen = Buffer.from(readAt(fd, 0, 8)).readBigUInt64LE(0);
  if (headerLen > BigInt(MAX_HEADER_BYTES)) throw new Error(`${path}: safetensors header length ${headerLen} is too large`);
  const dataStart = 8 + Number(headerLen);
  if (dataStart > fileSize) {
    throw new Error(`${path}: truncated safetensors file: header needs ${headerLen} bytes, file has ${fileSize - 8}`);
  }
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(readAt(fd, 8, dataStart - 8)).toString("utf8"));
  } catch (err) {
    throw new Error(`${path}: safetensors header is not valid JSON (${(err as Error).message})`, { cause: err });
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new Error(`${path}: safetensors header must be a JSON object`);
  }
  const dataLen = fileSize - dataStart;
  let metadata: Record<string, string> = {};
  const entries: { name: string; dtype: Dtype; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (typeof raw !== "object" || raw === null || Object.values(raw).some((v) => typeof v !== "string")) {
        throw new Error(`${path}: __metadata__ must map strings to strings`);
      }
      metadata = raw as Record<string, string>;
      continue;
    }
    const info = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const dtype = info?.dtype;
    if (typeof dtype !== "string" || !Object.hasOwn(DTYPE_BYTES, dtype)) {
      throw new Error(`${path}: tensor ${name} has dtype ${String(dtype)}; only F32, F16, BF16, I32 and I64 are supported`);
    }
    const size = DTYPE_BYTES[dtype as Dtype];
    const shape = info.shape;
    const offs = info.data_offsets;
    if (!Array.isArray(shape) || shape.some((d) => !Number.isInteger(d) || d < 0)) {
      throw new Error(`${path}: tensor ${name} has a bad shape`);
    }
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isInteger(o) && o >= 0) || offs[0] > offs[1]) {
      throw new Error(`${path}: tensor ${name} has bad data_offsets`);
    }
    const [begin, end] = offs as [number, number];
    if (end - begin !== numel(shape as number[]) * size) {
      throw new Error(
        `${path}: tensor ${name}: data_offsets span ${end - begin} bytes, ${dtype} shape [${shape}] needs ${numel(shape as number[]) * size}`,
      );
    }
    if (end > dataLen) {
      throw new Error(`${path}: truncated safetensors file: tensor ${name} ends at data byte ${end}, file has ${dataLen}`);
    }
    entries.push({ name, dtype: dtype as Dtype, shape: shape as number[], begin, end });
  }
  entries.sort((a, b) => a.begin - b.begin || a.end - b.end);
  // The byte buffer must be entirely indexed, without holes or overlaps (as the reference reader checks).
  let covered = 0;
  for (const e of entries) {
    if (e.begin !== covered) {
      throw new Error(`${path}: tensor ${e.name} starts at data byte ${e.begin}, expected ${covered} (holes and overlaps are not allowed)`);
    }
    covered = e.end;
  }
  if (covered !== dataLen) throw new Error(`${path}: safetensors tensors cover ${covered} data bytes, file has ${dataLen}`);
  const tensors = entries.map(({ name, dtype, shape, begin, end }): AnyTensor => {
    // A fresh buffer per tensor: aligned to the element size whatever the file offset.
    const bytes = readAt(fd, dataStart + begin, end - begin);
    if (dtype === "F32") return { name, shape, data: new Float32Array(bytes) };
    if (dtype === "F16") return { name, shape, data: f16ToF32(new Uint16Array(bytes)) };
    if (dtype === "BF16") return { name, shape, data: bf16ToF32(new Uint16Array(bytes)) };
    if (dtype === "I32") return { name, shape, data: new Int32Array(bytes) };
    const wide = new BigInt64Array(bytes);
    const data = new Int32Array(wide.length);
    for (let i = 0; i < wide.length; i++) {
      const v = wide[i] as bigint;
      if (v > 2147483647n || v < -2147483648n) {
        throw new Error(`${path}: tensor ${name} (I64) has ${name}[${i}] = ${v}, outside the int32 range this reader supports`);
      }
      data[i] = Number(v);
    }
    return { name, shape, data };
  });
  return { tensors, metadata, dtypes: new Map(entries.map((e) => [e.name, e.dtype])) };
}

function assertLittleEndian(): void {
  if (endianness() !== "LE") throw new Error("safetensors I/O needs a little-endian machine");
}
