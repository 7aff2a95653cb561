// How tests run the stand-in llama-server (fake-llama-server-main.ts) through the production process
// manager, and how they write its "GGUF" files.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("./fake-llama-server-main.ts", import.meta.url));

/** `binary` and `binaryArgs` for ManagedLlamaServer that run the fake under node with tsx. */
export function fakeLlamaServerCommand(): { binary: string; binaryArgs: string[] } {
  return { binary: process.execPath, binaryArgs: ["--import", "tsx", MAIN] };
}

/** Write a fake model file whose weights are named `weights` (a name containing FAIL fails to load). */
export function writeFakeGguf(path: string, weights: string): string {
  writeFileSync(path, `GGUF ${weights}\n`);
  return path;
}
