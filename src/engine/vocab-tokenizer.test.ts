import { describe, expect, it } from "vitest";
import { stopTokenIds } from "../model/chat-template.js";
import { Vocab } from "../model/vocab.js";
import { VocabTokenizer } from "./vocab-tokenizer.js";

const vocab = new Vocab();
const tok = new VocabTokenizer(vocab);

describe("VocabTokenizer", () => {
  it("is Arbor's Vocab: same ids, text, stops and BOS", () => {
    expect(tok.size).toBe(vocab.size);
    expect(tok.encode("a+b = é")).toEqual(vocab.encode("a+b = é"));
    expect(tok.decode(vocab.encode("a+b = é"))).toBe("a+b = é");
    expect(tok.stopIds).toEqual(stopTokenIds(vocab));
    expect(tok.addBos).toBe(true);
    expect(tok.bosId).toBe(vocab.bosId);
  });

  it("turns special-token text into the token only with special on, as llama.cpp's parse_special", () => {
    const call = vocab.controlId("<|tool_call|>");
    expect(tok.encode("<|tool_call|>add ", { special: true })).toEqual([call, ...vocab.encode("add ")]);
    expect(tok.encode("<s>x</s>", { special: true })).toEqual([vocab.bosId, ...vocab.encode("x"), vocab.eosId]);
    expect(tok.encode("<|tool_call|>")).toEqual(vocab.encode("<|tool_call|>"));
    expect(tok.isSpecial(call)).toBe(true);
    expect(tok.isSpecial(vocab.encode("a")[0]!)).toBe(false);
  });

  it("gives a byte token's byte and other tokens' UTF-8 text", () => {
    const [b1, b2] = vocab.encode("é");
    expect([...tok.tokenBytes(b1!), ...tok.tokenBytes(b2!)]).toEqual([0xc3, 0xa9]);
    expect(tok.tokenBytes(vocab.encode(" ")[0]!)).toEqual([0x20]);
    expect(() => tok.tokenBytes(vocab.size)).toThrowError(/outside the vocabulary/);
  });
});
