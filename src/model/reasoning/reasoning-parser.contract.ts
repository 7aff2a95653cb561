// The contract every reasoning parser passes (run for each registered one, with and without
// startsInReasoning, by reasoning-parsers.test.ts): what `format` writes splits back into the same
// reasoning and content, a streamed answer split anywhere gives exactly the whole answer's split,
// and nothing but the reasoning tags themselves is dropped.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ReasoningParser, ReasoningStep } from "./reasoning-parser.js";

/** Reasoning and content of `text` fed in pieces cut at `cuts` (sorted offsets), then flushed. */
export function splitPieces(parser: ReasoningParser, text: string, cuts: readonly number[] = []): ReasoningStep {
  const stream = parser.stream();
  let reasoning = "";
  let content = "";
  let from = 0;
  for (const at of [...cuts, text.length]) {
    const got = stream.push(text.slice(from, at));
    reasoning += got.reasoning;
    content += got.content;
    from = at;
  }
  const rest = stream.flush();
  return { reasoning: reasoning + rest.reasoning, content: content + rest.content };
}

// Text built from pieces of the tags, so the tags (whole and cut) land anywhere.
const piece = fc.constantFrom("<think>", "</think>", "<", "</", "<th", "</think", "think>", ">", "\n", "a", "b c", "é🙂", "<tool_call>");
const text = fc.array(piece, { maxLength: 10 }).map((p) => p.join(""));
const cutsFor = (t: string) => fc.uniqueArray(fc.integer({ min: 0, max: t.length }), { maxLength: 6 }).map((c) => c.sort((x, y) => x - y));

export function reasoningParserContract(parser: ReasoningParser): void {
  describe(`reasoning parser contract: ${parser.name}${parser.startsInReasoning ? " (startsInReasoning)" : ""}`, () => {
    it("a streamed answer split at random places gives exactly the whole answer's split", () => {
      fc.assert(
        fc.property(
          text.chain((t) => fc.tuple(fc.constant(t), cutsFor(t))),
          ([t, cuts]) => {
            expect(splitPieces(parser, t, cuts)).toEqual(splitPieces(parser, t));
          },
        ),
        { numRuns: 500 },
      );
    });

    it("every split of fixed answers, one character at a time included, gives the whole answer's split", () => {
      for (const t of ["<think>\nplan\n</think>\n\nanswer", "<think>cut off", "plain answer", "<thin", "</think>x", "<think></think>", ""]) {
        const whole = splitPieces(parser, t);
        for (let at = 0; at <= t.length; at++) expect(splitPieces(parser, t, [at]), `${JSON.stringify(t)} @${at}`).toEqual(whole);
        expect(splitPieces(parser, t, [...t].map((_, i) => i))).toEqual(whole);
      }
    });

    it("drops nothing but the reasoning tags", () => {
      fc.assert(
        fc.property(text, (t) => {
          const { reasoning, content } = splitPieces(parser, t);
          const dropped = t.length - reasoning.length - content.length;
          expect(dropped === 0 || dropped === "<think>".length || dropped === "</think>".length || dropped === "<think></think>".length).toBe(true);
          expect(t.endsWith(content)).toBe(true);
        }),
        { numRuns: 300 },
      );
    });

    it("format → split gives back the reasoning and the content", () => {
      const reasoningArb = parser.name === "none" ? fc.constant("") : text.filter((r) => !r.includes("</think>") && !r.startsWith("<think>"));
      fc.assert(
        fc.property(reasoningArb, text, (reasoning, content) => {
          expect(splitPieces(parser, parser.format(reasoning, content))).toEqual({ reasoning, content });
        }),
        { numRuns: 300 },
      );
    });
  });
}
