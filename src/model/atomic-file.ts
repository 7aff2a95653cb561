// Checkpoint files are written whole or not at all: into a temp file beside the target, fsynced,
// then renamed over it, so a crash never leaves a half-written GGUF or safetensors file behind.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";

/** Write `path` atomically; `write` receives a `put` that appends bytes in order. */
export function writeFileAtomic(path: string, write: (put: (bytes: Uint8Array) => void) => void): void {
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  let open = true;
  try {
    let pos = 0;
    write((bytes) => {
      writeSync(fd, bytes, 0, bytes.byteLength, pos);
      pos += bytes.byteLength;
    });
    fsyncSync(fd);
    closeSync(fd);
    open = false;
    renameSync(tmp, path);
  } catch (err) {
    if (open) closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
}
