// The contract every tool-call parser passes (run for each registered one by tool-parsers.test.ts):
// what `format` writes parses back to the same calls and content; a streamed answer, split
// anywhere, adds up to exactly the whole answer's result; a malformed call (undeclared name,
// arguments that are not a JSON object, a call never closed) stays text verbatim; `single` keeps
// later calls as text; a forced call's prefill plus the rest parses as that call.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ParsedCall, ToolCallParser, ToolParseOptions } from "./tool-parser.js";
import { pythonJsonDumps } from "./scan.js";

const NAMES = ["get_weather", "noop", "search-web"] as const;
const names: ReadonlySet<string> = new Set(NAMES);

type Opts = Partial<Omit<ToolParseOptions, "names" | "idPrefix">>;
type Call = { name: string; arguments: string };

/** Content and calls of `text` fed in pieces cut at `cuts` (sorted offsets), then flushed. */
export function parsePieces(parser: ToolCallParser, text: string, cuts: readonly number[] = [], opts: Opts = {}): { content: string; calls: ParsedCall[] } {
  const stream = parser.stream({ names, idPrefix: "call_t", ...opts });
  let content = "";
  const calls: ParsedCall[] = [];
  let from = 0;
  for (const at of [...cuts, text.length]) {
    const got = stream.push(text.slice(from, at));
    content += got.content;
    calls.push(...got.calls);
    from = at;
  }
  const rest = stream.flush();
  expect(stream.callCount).toBe(calls.length + rest.calls.length);
  return { content: content + rest.content, calls: [...calls, ...rest.calls] };
}

/** The calls as `parser` reports them (ids `call_t_<n>`, or the family's own id scheme). */
const parsedBy =
  (parser: ToolCallParser) =>
  (calls: readonly Call[]): ParsedCall[] =>
    calls.map((c, i) => ({ id: parser.callId?.("call_t", i) ?? `call_t_${i}`, type: "function", function: { name: c.name, arguments: c.arguments } }));

// Strings inside arguments and content avoid `<` and `[`, which open markers; the fixed cases
// below put marker-like text where it must stay text.
const plain = (maxLength: number) => fc.string({ unit: fc.constantFrom(..."ab Z09_é🙂\n\t{}\":,;\\/'.-".split("")), maxLength });
const argValue = fc.oneof(plain(6), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }));
const argObject = fc.dictionary(plain(5), fc.oneof(argValue, fc.dictionary(plain(3), argValue, { maxKeys: 2 })), { maxKeys: 3 });
const callArb: fc.Arbitrary<Call> = fc.record({ name: fc.constantFrom(...NAMES), arguments: argObject.map((o) => pythonJsonDumps(o)) });

export function toolParserContract(parser: ToolCallParser): void {
  const asParsed = parsedBy(parser);
  describe(`tool-call parser contract: ${parser.name}`, () => {
    const contentFor = (calls: readonly Call[]) => (calls.length > 0 && !parser.contentWithCalls ? fc.constant("") : plain(12));
    const answer = fc
      .array(callArb, { maxLength: 3 })
      .chain((calls) => fc.record({ calls: fc.constant(calls), content: contentFor(calls) }))
      // Content that reads as content on its own (text that is itself a call is not content).
      .filter(({ content }) => {
        const alone = parsePieces(parser, content);
        return alone.calls.length === 0 && alone.content === content;
      });

    it("format → parse gives back the calls and the content", () => {
      fc.assert(
        fc.property(answer, ({ content, calls }) => {
          expect(parsePieces(parser, parser.format(content, calls))).toEqual({ content, calls: asParsed(calls) });
        }),
        { numRuns: 300 },
      );
    });

    it("a streamed answer split at random places gives exactly the whole answer's result", () => {
      const split = answer.chain((a) => {
        const text = parser.format(a.content, a.calls);
        return fc.record({ text: fc.constant(text), cuts: fc.uniqueArray(fc.integer({ min: 0, max: text.length }), { maxLength: 8 }).map((c) => c.sort((x, y) => x - y)) });
      });
      fc.assert(
        fc.property(split, fc.boolean(), ({ text, cuts }, single) => {
          expect(parsePieces(parser, text, cuts, { single })).toEqual(parsePieces(parser, text, [], { single }));
        }),
        { numRuns: 300 },
      );
    });

    it("any text made of marker pieces streams exactly as it parses whole, and without calls stays verbatim", () => {
      const piece = fc.constantFrom(
        "<tool_call>", "</tool_call>", "<tool_", "\n", "[TOOL_CALLS]", "[TOOL_", " [", "[", "]", "{", "}", ", ", "; ", "<|python_tag|>", "<|tool_call|>", "<|/tool_call|>",
        '{"name": "noop", "arguments": {}}', '{"name": "get_weather", "parameters": {"a": "}"}}', '"name": "rm"', "noop ", "a", " ",
      );
      const text = fc.array(piece, { maxLength: 12 }).map((p) => p.join(""));
      fc.assert(
        fc.property(text.chain((t) => fc.tuple(fc.constant(t), fc.uniqueArray(fc.integer({ min: 0, max: t.length }), { maxLength: 6 }).map((c) => c.sort((x, y) => x - y)))), fc.boolean(), ([t, cuts], single) => {
          const whole = parsePieces(parser, t, [], { single });
          expect(parsePieces(parser, t, cuts, { single })).toEqual(whole);
          if (whole.calls.length === 0) expect(whole.content).toBe(t);
          expect(whole.content.length).toBeLessThanOrEqual(t.length);
        }),
        { numRuns: 500 },
      );
    });

    const twoCalls: Call[] = [
      { name: "get_weather", arguments: '{"city": "Paris", "units": ["c"]}' },
      { name: "noop", arguments: "{}" },
    ];
    const samples = [
      parser.format(parser.contentWithCalls ? "Let me check.\n" : "", twoCalls),
      parser.format("", [{ name: "search-web", arguments: '{"q": "a \\"quoted\\" } ] brace"}' }]),
      parser.format("", [{ name: "rm", arguments: "{}" }]),
      parser.format("", [{ name: "noop", arguments: "{oops" }]),
      "Plain answer with <tags>, [brackets] and {braces}; nothing else.",
      "<tool_call>\n<|tool_call|>[TOOL_CALLS]<|python_tag|>{",
    ];

    it("every split of fixed answers (two pieces, and one character at a time) gives the whole answer's result", () => {
      for (const text of samples) {
        for (const single of [false, true]) {
          const whole = parsePieces(parser, text, [], { single });
          for (let at = 0; at <= text.length; at++) expect(parsePieces(parser, text, [at], { single }), `${JSON.stringify(text)} @${at}`).toEqual(whole);
          expect(parsePieces(parser, text, [...text].map((_, i) => i), { single })).toEqual(whole);
        }
      }
      expect(parsePieces(parser, samples[0] as string).calls).toEqual(asParsed(twoCalls));
    });

    it("keeps an undeclared tool, arguments that are not a JSON object, and text without calls verbatim", () => {
      for (const args of ["{}", '{"a": 1}']) {
        const text = parser.format("", [{ name: "rm", arguments: args }]);
        expect(parsePieces(parser, text)).toEqual({ content: text, calls: [] });
      }
      for (const args of ["{oops", "[1,2]", '"text"', "42"]) {
        const text = parser.format("", [{ name: "noop", arguments: args }]);
        expect(parsePieces(parser, text), text).toEqual({ content: text, calls: [] });
      }
      for (const text of samples.slice(4)) expect(parsePieces(parser, text)).toEqual({ content: text, calls: [] });
    });

    it("keeps a call that is never closed as text at the end of the answer", () => {
      const text = parser.format("", [{ name: "get_weather", arguments: '{"city": "Oslo"}' }]);
      for (let n = 1; n < text.length; n++) {
        const cut = text.slice(0, n);
        expect(parsePieces(parser, cut, [], {}), cut).toEqual({ content: cut, calls: [] });
      }
    });

    it("with single (parallel_tool_calls false) keeps the calls after the first as text", () => {
      const text = parser.format("", twoCalls);
      const got = parsePieces(parser, text, [], { single: true });
      expect(got.calls).toEqual(asParsed(twoCalls.slice(0, 1)));
      expect(got.content).toContain("noop");
      expect(text.length).toBeGreaterThanOrEqual(got.content.length);
    });

    it("continues a forced call: the prefill then the rest parses as the call", () => {
      fc.assert(
        fc.property(callArb, (call) => {
          const text = parser.format("", [call]);
          for (const prefill of [parser.prefill(call.name), parser.prefill()]) {
            expect(text.startsWith(prefill), prefill).toBe(true);
            expect(parsePieces(parser, text.slice(prefill.length), [], { prefill })).toEqual({ content: "", calls: asParsed([call]) });
          }
          expect(parser.prefill(call.name).startsWith(parser.prefill())).toBe(true);
        }),
        { numRuns: 50 },
      );
      // A forced opening the model does not complete stays text, the prefill included.
      const prefill = parser.prefill("noop");
      expect(parsePieces(parser, "no", [], { prefill })).toEqual({ content: `${prefill}no`, calls: [] });
    });
  });
}
