// The model the engine serves for Arbor's vocabulary: Arbor's Vocab itself as the tokenizer (no
// adapter), and the one way the served text differs from Vocab.decode with `special`.
import { describe, expect, it } from "vitest";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import { stopTokenIds } from "../model/chat-template.js";
import { Vocab } from "../model/vocab.js";
import { arborModel, isArborVocabulary } from "./served-model.js";

const vocab = new Vocab();

describe("arborModel", () => {
  const served = arborModel();
  const tok = served.tokenizer;

  it("serves Arbor's Vocab: same ids, stops, BOS, token text and bytes", () => {
    expect(tok).toBeInstanceOf(Vocab);
    expect(served.arbor).toBe(true);
    expect(served.chat).toBeInstanceOf(ArborChatFormat);
    expect(tok.size).toBe(vocab.size);
    expect(tok.encode("a+b = é")).toEqual(vocab.encode("a+b = é"));
    expect([...served.stopIds]).toEqual(stopTokenIds(vocab));
    expect(tok.addBos).toBe(true);
    expect(tok.bosId).toBe(vocab.bosId);
    for (let id = 0; id < vocab.size; id++) {
      expect(tok.tokenText(id)).toBe(vocab.tokenText(id));
      expect(tok.tokenBytes(id)).toEqual(vocab.tokenBytes(id));
    }
    expect(isArborVocabulary(tok)).toBe(true);
  });

  it("parses special-token text only with special on, as llama.cpp's parse_special (<unk> included)", () => {
    const call = vocab.controlId("<|tool_call|>");
    expect(tok.encode("<|tool_call|>add ", { special: true })).toEqual([call, ...vocab.encode("add ")]);
    expect(tok.encode("<s>x</s><unk>", { special: true })).toEqual([vocab.bosId, ...vocab.encode("x"), vocab.eosId, vocab.unkId]);
    expect(tok.encode("<|tool_call|>")).toEqual(vocab.encode("<|tool_call|>"));
    expect(tok.isSpecial(call)).toBe(true);
    expect(tok.isSpecial(vocab.encode("a")[0]!)).toBe(false);
  });

  it("shows the chat markers in text but never <s>, </s> or <unk>, with or without special", () => {
    const ids = [vocab.bosId, vocab.controlId("<|user|>"), ...vocab.encode("hi"), vocab.unkId, vocab.controlId("<|end|>"), vocab.eosId];
    expect(tok.decode(ids)).toBe("<|user|>hi<|end|>");
    expect(tok.decode(ids, { special: true })).toBe("<|user|>hi<|end|>");
    // Vocab itself renders them with special, as llama.cpp's detokenize does.
    expect(vocab.decode(ids, { special: true })).toBe("<s><|user|>hi<unk><|end|></s>");
  });
});
