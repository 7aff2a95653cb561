// The typed GGUF metadata value, shared by the GGUF writer (gguf.ts) and the modules that build
// metadata for it (gguf-tokenizer.ts) without importing the writer.

type Scalar =
  | { type: "u32" | "i32" | "f32" | "f64"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string };

/** One typed GGUF metadata value, as `writeGgufRaw` writes it. */
export type MetaValue = Scalar | { type: "array"; elem: "string"; value: string[] } | { type: "array"; elem: "f32" | "i32" | "u32"; value: number[] };
