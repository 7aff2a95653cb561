import { describe, expect, it } from "vitest";
import { CONTROL_TOKENS, SPACE_PIECE, TokenType, Vocab } from "./vocab.js";

const vocab = new Vocab();

describe("Vocab layout", () => {
  it("has the documented ids and types", () => {
    expect(vocab.size).toBe(3 + 256 + 1 + 94 + CONTROL_TOKENS.length);
    expect(vocab.pieces.slice(0, 4)).toEqual(["<unk>", "<s>", "</s>", "<0x00>"]);
    expect(vocab.pieces[258]).toBe("<0xFF>");
    expect(vocab.pieces[259]).toBe(SPACE_PIECE);
    expect(vocab.pieces[260]).toBe("!");
    expect(vocab.pieces[353]).toBe("~");
    expect(vocab.types.slice(0, 4)).toEqual([TokenType.unknown, TokenType.control, TokenType.control, TokenType.byte]);
    expect(vocab.types[259]).toBe(TokenType.normal);
    expect(vocab.types[353]).toBe(TokenType.normal);
    expect(vocab.scores).toHaveLength(vocab.size);
    expect(new Set(vocab.pieces).size).toBe(vocab.size);
  });

  it("maps control tokens to ids after the plain pieces", () => {
    CONTROL_TOKENS.forEach((name, i) => {
      const id = vocab.controlId(name);
      expect(id).toBe(354 + i);
      expect(vocab.pieces[id]).toBe(name);
      expect(vocab.isControl(id)).toBe(true);
    });
    expect(vocab.isControl(vocab.eosId)).toBe(true);
    expect(vocab.isControl(vocab.encode("a")[0] as number)).toBe(false);
    expect(() => vocab.controlId("<|nope|>")).toThrow(/unknown control token '<\|nope\|>'/);
  });
});

describe("Vocab.encode / decode", () => {
  it("encodes spaces, printable ASCII and byte fallback", () => {
    expect(vocab.encode(" a\n")).toEqual([259, 260 + ("a".charCodeAt(0) - 0x21), 3 + 0x0a]);
    expect(vocab.encode("é")).toEqual([3 + 0xc3, 3 + 0xa9]);
    expect(vocab.encode("")).toEqual([]);
  });

  it("reads a literal ▁ as the space piece, as llama.cpp does", () => {
    expect(vocab.encode("a\u2581b")).toEqual(vocab.encode("a b"));
    expect(vocab.encode("\u2582")).toEqual([3 + 0xe2, 3 + 0x96, 3 + 0x82]);
  });

  it("does not parse control-token text", () => {
    const ids = vocab.encode("<|user|></s>");
    expect(ids).toHaveLength("<|user|></s>".length);
    expect(ids.some((id) => vocab.isControl(id))).toBe(false);
  });

  it.each(["hello world", "héllo wörld ✓ 日本", "  lead and trail  ", "tab\there\nnew\r\nline", "😀 emoji", "~!@#$%^&*()"])(
    "round-trips %j",
    (text) => {
      expect(vocab.decode(vocab.encode(text))).toBe(text);
    },
  );

  it("renders control tokens as text and BOS/EOS/UNK as nothing", () => {
    const ids = [vocab.bosId, vocab.controlId("<|user|>"), ...vocab.encode("hi"), vocab.controlId("<|end|>"), vocab.eosId, vocab.unkId];
    expect(vocab.decode(ids)).toBe("<|user|>hi<|end|>");
  });

  it("rejects ids outside the vocabulary", () => {
    expect(() => vocab.decode([vocab.size])).toThrow(/outside the vocabulary/);
    expect(() => vocab.tokenText(-1)).toThrow(/outside the vocabulary/);
  });

  it("gives display text of single tokens", () => {
    expect(vocab.tokenText(259)).toBe(" ");
    expect(vocab.tokenText(vocab.encode("\n")[0] as number)).toBe("\n");
    expect(vocab.tokenText(3 + 0xc3)).toBe("<0xC3>");
    expect(vocab.tokenText(vocab.eosId)).toBe("</s>");
    expect(vocab.tokenText(vocab.controlId("<|tool_call|>"))).toBe("<|tool_call|>");
  });
});
