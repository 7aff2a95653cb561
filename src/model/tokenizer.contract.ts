// The contract every ModelTokenizer passes (Arbor's Vocab, the made-here BPE and SPM tokenizers, and
// any tokenizer added later): ids in range, plain text round-trips, special-token text becomes its
// id only when asked, byte listings add up to the text, bad ids are refused by name.
import { describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import type { ModelTokenizer } from "./tokenizer.js";

export interface TokenizerContractOptions {
  /** Texts of CONTROL tokens: one id each with `special`, never an id without. */
  controlTexts: readonly string[];
  /** Texts of tokens parsed in any mode (USER_DEFINED, e.g. Qwen's `<tool_call>`); may be empty. */
  alwaysParsedTexts?: readonly string[];
  /** Texts that must survive encode → decode unchanged (plain text, no special-token text). */
  roundTrip?: readonly string[];
  /** SPM `add_space_prefix`: encoded text carries a leading space that decode drops again. */
  spacePrefix?: boolean;
}

const DEFAULT_ROUND_TRIP = [
  "",
  "hello world",
  "What is 12*7+3?",
  "  leading and trailing  ",
  "tabs\tand\nnew\r\nlines\n\n",
  "héllo wörld ✓ 日本語 😀",
  '{"name": "calc", "arguments": {"expression": "2 + 3"}}',
  "Answer: -42",
  "I'm sure they'll say it's fine",
];

/** Register the shared tokenizer contract for `make()`. */
export function modelTokenizerContract(name: string, make: () => ModelTokenizer, opts: TokenizerContractOptions): void {
  describe(`ModelTokenizer contract: ${name}`, () => {
    const tok = make();

    it("has ids in range, stop ids including EOS", () => {
      expect(tok.size).toBeGreaterThan(0);
      for (const id of [tok.bosId, tok.eosId]) if (id !== undefined) expect(id >= 0 && id < tok.size).toBe(true);
      expect(tok.stopIds.length).toBeGreaterThan(0);
      for (const id of tok.stopIds) expect(id >= 0 && id < tok.size).toBe(true);
      if (tok.eosId !== undefined) expect(tok.stopIds).toContain(tok.eosId);
      expect(typeof tok.addBos).toBe("boolean");
    });

    it.each(opts.roundTrip ?? DEFAULT_ROUND_TRIP)("round-trips %j, byte listings adding up to its UTF-8", (text) => {
      const ids = tok.encode(text);
      expect(tok.decode(ids)).toBe(text);
      const prefix = opts.spacePrefix && text !== "" ? " " : "";
      expect(Buffer.from(ids.flatMap((id) => tok.tokenBytes(id))).toString("utf8")).toBe(prefix + text);
      for (const id of ids) expect(tok.isSpecial(id)).toBe(false);
    });

    it("turns control-token text into its id only with special", () => {
      for (const text of opts.controlTexts) {
        const ids = tok.encode(text, { special: true });
        expect(ids, text).toHaveLength(1);
        const id = ids[0] as number;
        expect(tok.isSpecial(id), text).toBe(true);
        expect(tok.decode([id], { special: true })).toBe(text);
        expect(tok.tokenText(id)).toBe(text);
        const plain = tok.encode(text);
        expect(plain, text).not.toContain(id);
        expect(tok.decode(plain)).toBe(text);
      }
    });

    it("parses always-parsed added tokens in both modes and renders them as text", () => {
      for (const text of opts.alwaysParsedTexts ?? []) {
        const ids = tok.encode(text);
        expect(ids, text).toHaveLength(1);
        expect(tok.encode(text, { special: true })).toEqual(ids);
        expect(tok.isSpecial(ids[0] as number)).toBe(false);
        expect(tok.decode(ids)).toBe(text);
      }
    });

    it("splits mixed text around special tokens and is deterministic", () => {
      const rng = new Rng(7);
      const pool = ["a", " ", "b c", "\n", "12", "é", "😀", "{", '"', ...opts.controlTexts, ...(opts.alwaysParsedTexts ?? [])];
      const again = make();
      for (let n = 0; n < 40; n++) {
        const text = Array.from({ length: rng.int(1, 10) }, () => rng.pick(pool)).join("");
        const ids = tok.encode(text, { special: true });
        expect(again.encode(text, { special: true })).toEqual(ids);
        // Without `special`, no control id appears whatever the text says.
        for (const id of tok.encode(text)) expect(tok.isSpecial(id), JSON.stringify(text)).toBe(false);
        for (const id of ids) expect(id >= 0 && id < tok.size).toBe(true);
      }
    });

    it("refuses ids outside the vocabulary, naming the id", () => {
      expect(() => tok.decode([tok.size])).toThrow(RangeError);
      expect(() => tok.decode([tok.size])).toThrow(new RegExp(`${tok.size}.*outside the vocabulary`));
      expect(() => tok.tokenBytes(-1)).toThrow(/outside the vocabulary/);
      expect(() => tok.isSpecial(1.5)).toThrow(/outside the vocabulary/);
    });
  });
}
