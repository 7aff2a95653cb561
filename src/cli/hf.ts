// `arbor hf export` and `arbor hf convert`: Hugging Face checkpoints out of and into Arbor
// (src/model/hf/). Errors about the input files are the user's to fix, so they print as one line.
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { ArborError } from "../core/errors.js";
import { makeOutputDir } from "../core/output-dir.js";
import { convertHfToGguf } from "../model/hf/hf-convert.js";
import { exportHfCheckpoint } from "../model/hf/hf-export.js";

/** Export a llama GGUF as a Hugging Face checkpoint directory; returns the lines printed. */
export function hfExportCommand(gguf: string, outDir: string, log: (line: string) => void = console.log): void {
  const src = resolve(gguf);
  if (!existsSync(src)) throw new ArborError(`${src}: no such file`, "config");
  const out = resolve(outDir);
  makeOutputDir(out, "<dir>");
  const r = asUserError(() => exportHfCheckpoint(src, out));
  log(`exported ${src} → ${out}`);
  log(`  ${r.files.join(", ")} (${r.tensors} tensors, F32${r.tiedEmbeddings ? ", tied embeddings" : ""})`);
}

/** Convert a Hugging Face checkpoint directory to an F32 GGUF. */
export function hfConvertCommand(hfDir: string, outGguf: string, log: (line: string) => void = console.log): void {
  const src = resolve(hfDir);
  const out = resolve(outGguf);
  makeOutputDir(dirname(out), "<out>'s folder");
  const r = asUserError(() => convertHfToGguf(src, out));
  const dtypes = Object.entries(r.dtypes)
    .map(([d, n]) => `${n} ${d}`)
    .join(", ");
  log(`converted ${src} → ${out}`);
  log(`  architecture ${r.arch}, ${r.tensors} tensors (from ${dtypes}, written F32), vocabulary ${r.vocab} (${r.tokenizer}${r.pre ? `, pre-tokenizer ${r.pre}` : ""})`);
}

function asUserError<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    // The model/hf errors name the file and the reason: the user's input, printed as one line.
    if (err instanceof Error && !(err instanceof ArborError)) throw new ArborError(err.message.split("\n")[0] as string, "model");
    throw err;
  }
}
