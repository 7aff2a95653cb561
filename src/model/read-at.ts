// Reading a byte range of a checkpoint file (GGUF, safetensors) through a file descriptor: weight
// files are often larger than one Buffer (readFileSync stops at 2 GiB), so tensors are read one by
// one, each into its own aligned copy.
import { readSync } from "node:fs";

/** `length` bytes of `fd` from `position`, in a fresh ArrayBuffer (shorter reads leave zeros at a file's end). */
export function readAt(fd: number, position: number, length: number): ArrayBuffer {
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    // readSync takes at most 2 GiB a call: an embedding table can be larger.
    const n = readSync(fd, out, done, Math.min(length - done, 1 << 30), position + done);
    if (n === 0) break;
    done += n;
  }
  return out.buffer;
}
