// Property test of the servers' hardening (issue 13, done-when): generated malformed, oversized and
// deeply nested requests to the gateway (every surface) and to the engine. Every answer is a 2xx
// or a 4xx whose body is an error object naming the problem in the route's shape; the servers stay
// up, no backend leaves rotation, nothing is recorded and no program slot is held for a refused
// request, and memory returns near its baseline. Run counts are bounded to stay well under a minute.
import { runInNewContext } from "node:vm";
import { setFlagsFromString } from "node:v8";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allBackendsUp, startHardeningSetup, type HardeningSetup } from "../testing/hardening-fixture.js";

const BODY_LIMIT = 256 * 1024;
const CONTEXT = 512;

let s: HardeningSetup;
beforeAll(async () => {
  s = await startHardeningSetup({ bodyLimitBytes: BODY_LIMIT, maxPrograms: 64 }, {}, CONTEXT);
});
afterAll(async () => {
  await s?.close();
});

/** V8's collector, to compare heap sizes after garbage is gone. */
function collector(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

function heapAfterGc(gc: () => void): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const VALID_CHAT = { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 4 };
const VALID_BY_SURFACE: Record<string, object> = {
  "chat/completions": VALID_CHAT,
  completions: { model: "m", prompt: "hi", max_tokens: 4 },
  messages: { model: "m", max_tokens: 4, messages: [{ role: "user", content: "hi" }] },
  responses: { model: "m", input: "hi", max_output_tokens: 4 },
};

/** `[[[…]]]` (or `{"a":{"a":…}}`) `depth` levels deep, as JSON text. */
function nestedText(depth: number, kind: "array" | "object"): string {
  return kind === "array" ? `${"[".repeat(depth)}${"]".repeat(depth)}` : `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
}

/** A body as JSON text: valid, mutated, random, deeply nested, oversized or not JSON at all. */
const bodyArb = (surface: string): fc.Arbitrary<string> => {
  const valid = VALID_BY_SURFACE[surface] as Record<string, unknown>;
  const fields = [...Object.keys(valid), "tools", "stream", "n", "temperature", "tool_choice", "program_id", "seed", "logprobs"];
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant(JSON.stringify(valid)) },
    {
      weight: 4,
      arbitrary: fc
        .record({ field: fc.constantFrom(...fields), value: fc.jsonValue({ maxDepth: 4 }) })
        .map(({ field, value }) => JSON.stringify({ ...valid, [field]: value })),
    },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v)) },
    {
      weight: 3,
      arbitrary: fc
        .record({ field: fc.constantFrom(...fields, "messages[0].content", "tools[0].function.parameters", "tools[0].function.parameters", "tools[0].function.parameters"), depth: fc.oneof(fc.integer({ min: 65, max: 300 }), fc.integer({ min: 20_000, max: 60_000 })), kind: fc.constantFrom("array" as const, "object" as const) })
        .map(({ field, depth, kind }) => {
          const deep = nestedText(depth, kind);
          if (field === "messages[0].content") return JSON.stringify({ ...valid, messages: [{ role: "user", content: "§" }] }).replace('"§"', deep);
          if (field === "tools[0].function.parameters") return JSON.stringify({ ...valid, tools: [{ type: "function", function: { name: "f", parameters: { type: "object", a: "§" } } }] }).replace('"§"', deep);
          return JSON.stringify({ ...valid, [field]: "§" }).replace('"§"', deep);
        }),
    },
    {
      weight: 2,
      arbitrary: fc.integer({ min: CONTEXT, max: 2 * BODY_LIMIT }).map((n) => JSON.stringify({ ...valid, messages: [{ role: "user", content: "x".repeat(n) }], prompt: "y".repeat(n), input: "z".repeat(n) })),
    },
    { weight: 2, arbitrary: fc.string({ maxLength: 200 }) },
    { weight: 1, arbitrary: fc.nat(40).map((cut) => JSON.stringify(valid).slice(0, cut)) },
  );
};

interface Answer {
  status: number;
  text: string;
}

async function send(url: string, path: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, text: await res.text() };
}

/** A 4xx body names the problem: OpenAI's `{error:{message,type}}`, or Anthropic's on /v1/messages. */
function expectErrorObject(a: Answer, anthropic: boolean): void {
  const json = JSON.parse(a.text) as { type?: unknown; error?: { message?: unknown; type?: unknown } };
  if (anthropic) expect(json.type).toBe("error");
  expect(typeof json.error?.type).toBe("string");
  expect(typeof json.error?.message).toBe("string");
  expect((json.error?.message as string).length).toBeGreaterThan(0);
}

describe("hostile requests (property)", () => {
  it("the gateway answers each with a 2xx or a clear 4xx, records nothing for a refusal and keeps its backend", { timeout: 120_000 }, async () => {
    const gc = collector();
    // Warm up, then take the baseline.
    for (let i = 0; i < 5; i++) await send(s.url, `/p/warm-${i}/v1/chat/completions`, JSON.stringify(VALID_CHAT), {});
    const baseline = heapAfterGc(gc);
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("chat/completions", "completions", "messages", "responses").chain((surface) =>
          fc.record({ surface: fc.constant(surface), body: bodyArb(surface), inHeader: fc.boolean() }),
        ),
        async ({ surface, body, inHeader }) => {
          const id = `gen-${n++}`;
          const recorded = s.calls.length;
          const path = inHeader ? `/v1/${surface}` : `/p/${id}/v1/${surface}`;
          const a = await send(s.url, path, body, inHeader ? { "x-arbor-program": id } : {});
          const ok = a.status >= 200 && a.status < 300;
          expect(ok || (a.status >= 400 && a.status < 500), `${a.status} ${a.text.slice(0, 300)}`).toBe(true);
          if (!ok) {
            expectErrorObject(a, surface === "messages");
            expect(s.calls.length).toBe(recorded);
            expect(s.gw.table.get(id)).toBeUndefined();
          } else {
            expect(s.calls.length - recorded).toBeLessThanOrEqual(1);
          }
          expect(allBackendsUp(s.gw)).toBe(true);
        },
      ),
      { numRuns: 150 },
    );
    // Still serving, and the garbage of 150 hostile requests is gone.
    expect((await send(s.url, "/p/after/v1/chat/completions", JSON.stringify(VALID_CHAT), {})).status).toBe(200);
    expect(heapAfterGc(gc) - baseline).toBeLessThan(48 * 1024 * 1024);
  });

  it("the engine answers each with a 2xx or a clear 4xx and stays up", { timeout: 120_000 }, async () => {
    const gc = collector();
    const baseline = heapAfterGc(gc);
    const engineBodies: Record<string, string> = { "/v1/chat/completions": "chat/completions", "/v1/completions": "completions", "/tokenize": "chat/completions" };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...Object.keys(engineBodies)).chain((path) => fc.record({ path: fc.constant(path), body: bodyArb(engineBodies[path] as string) })),
        async ({ path, body }) => {
          const a = await send(s.engine.url, path, body, {});
          expect((a.status >= 200 && a.status < 300) || (a.status >= 400 && a.status < 500), `${a.status} ${a.text.slice(0, 300)}`).toBe(true);
          if (a.status >= 400) expectErrorObject(a, false);
        },
      ),
      { numRuns: 120 },
    );
    expect((await fetch(`${s.engine.url}/health`)).status).toBe(200);
    expect(heapAfterGc(gc) - baseline).toBeLessThan(48 * 1024 * 1024);
  });
});
