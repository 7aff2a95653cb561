// GPT-2's byte-level alphabet: every byte maps to one printable unicode character, so a byte-level
// BPE vocabulary is a set of strings over 256 characters (`bytes_to_unicode` in GPT-2's encoder.py,
// `unicode_byte_to_utf8` in llama.cpp). Printable Latin-1 bytes map to themselves; the other 68 bytes
// (controls, space, 0x7F-0xA0, 0xAD) to U+0100 onwards in byte order.

function buildTables(): { toChar: string[]; toByte: Map<string, number> } {
  const keep = (b: number): boolean => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const toChar: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) toChar[b] = String.fromCodePoint(keep(b) ? b : 256 + n++);
  return { toChar, toByte: new Map(toChar.map((c, b) => [c, b])) };
}

const { toChar, toByte } = buildTables();

/** The byte-level character of each byte 0..255. */
export const BYTE_CHARS: readonly string[] = toChar;

/** Byte-level text of UTF-8 bytes: one character per byte. */
export function bytesToByteLevel(bytes: Uint8Array | readonly number[]): string {
  let out = "";
  for (const b of bytes) out += toChar[b] as string;
  return out;
}

/**
 * Bytes of a byte-level string. A character outside the alphabet cannot come from a byte; as
 * llama.cpp's `llama_decode_text` does, it becomes the text "[UNK_BYTE_0x<its UTF-8 hex><the whole text>]".
 */
export function byteLevelToBytes(text: string): number[] {
  const out: number[] = [];
  for (const ch of text) {
    const b = toByte.get(ch);
    if (b !== undefined) out.push(b);
    else {
      const hex = Array.from(Buffer.from(ch, "utf8"), (x) => x.toString(16).padStart(2, "0")).join("");
      for (const x of Buffer.from(`[UNK_BYTE_0x${hex}${text}]`, "utf8")) out.push(x);
    }
  }
  return out;
}
