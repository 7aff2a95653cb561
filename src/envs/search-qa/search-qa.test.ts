import { describe, expect, it } from "vitest";
import { parseToolCalls } from "../../model/markup.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import { extractAnswer, normalizeAnswer } from "./answer.js";
import { Bm25Index, tokenize } from "./bm25.js";
import { corpus } from "./corpus.js";
import { createSearchQaEnvironment } from "./search-qa.js";
import { openOutput, searchIndex, searchOutput } from "./tools.js";

const env = createSearchQaEnvironment();
// search-qa tools never touch the sandbox; a distinct object per program keys its variant.
const fakeSandbox = (id: string): Sandbox => ({
  programId: id,
  hostWorkspace: "/nonexistent",
  exec: async () => {
    throw new Error("search-qa must not exec");
  },
  writeFile: async () => {},
  destroy: async () => {},
});

describe("search-qa corpus and ranking", () => {
  it("is a deterministic corpus of a few hundred short documents with unique titles", () => {
    const c = corpus();
    expect(c.docs.length).toBeGreaterThanOrEqual(250);
    expect(c.docs.length).toBeLessThanOrEqual(400);
    expect(new Set(c.docs.map((d) => d.title)).size).toBe(c.docs.length);
    expect(c.docs[0]!.id).toBe("doc-0001");
    expect(JSON.stringify(c.docs).length).toBeLessThan(200_000);
  });

  it("BM25 ranks a document about a term above documents that mention it", () => {
    const idx = new Bm25Index([
      { id: "1", title: "Other", text: "mentions zork once among many other words here" },
      { id: "2", title: "Zork", text: "zork is a place" },
      { id: "3", title: "Unrelated", text: "nothing" },
    ]);
    expect(idx.search("zork", 5).map((h) => h.doc.id)).toEqual(["2", "1"]);
    expect(idx.search("absent", 5)).toEqual([]);
    expect(tokenize("Hello, World-42!")).toEqual(["hello", "world", "42"]);
  });

  it("tools show ids and snippets, open whole documents and reject bad input", () => {
    const d = corpus().docs[10]!;
    const out = searchOutput(d.title, { topK: 3, snippetChars: 20 });
    expect(out.ok).toBe(true);
    expect(out.output.split("\n")[0]).toBe(`[${d.id}] ${d.title}: ${d.text.slice(0, 20)}…`);
    expect(out.output.split("\n").length).toBeLessThanOrEqual(3);
    expect(searchOutput(d.title, { topK: 2, snippetChars: 0 }).output.split("\n")[0]).toBe(`[${d.id}] ${d.title}`);
    expect(openOutput(` [${d.id}] `)).toEqual({ ok: true, output: `# ${d.title}\n\n${d.text}` });
    expect(openOutput("doc-9999")).toMatchObject({ ok: false, output: expect.stringMatching(/no document 'doc-9999'/) });
    expect(searchOutput("   ", { topK: 3, snippetChars: 10 }).ok).toBe(false);
    expect(searchOutput("qqqqzzzz", { topK: 3, snippetChars: 10 })).toEqual({ ok: true, output: "no results" });
  });
});

describe("search-qa tasks, checker, golden conversations and variants", () => {
  it("tasks are deterministic; every hop's document is in the top 3 for its query", () => {
    const tasks = env.tasks(200, 5);
    expect(env.tasks(200, 5)).toEqual(tasks);
    expect(env.tasks(20, 5)).toEqual(tasks.slice(0, 20));
    expect(new Set(tasks.map((t) => t.meta.kind)).size).toBe(9);
    for (const t of tasks) {
      const hops = t.meta.hops as { query: string; docId: string }[];
      for (const h of hops) expect(searchIndex().search(h.query, 3).map((x) => x.doc.id), t.id).toContain(h.docId);
      // The last document read holds the answer.
      expect(normalizeAnswer(openOutput(hops[hops.length - 1]!.docId).output), t.id).toContain(normalizeAnswer(String(t.meta.answer)));
    }
  });

  it("golden conversations call the real tools and end with the answer", async () => {
    for (const t of env.tasks(30, 9)) {
      const g = env.golden(t);
      const sb = fakeSandbox(t.id);
      await env.setup(t, sb);
      for (let i = 2; i < g.length - 1; i += 2) {
        const call = parseToolCalls(g[i]!.content).calls[0]!;
        const tool = env.tools().find((x) => x.name === call.name)!;
        expect(g[i + 1]).toEqual({ role: "tool", name: call.name, content: (await tool.run(call.input, sb)).output });
      }
      expect(await env.check(t, { finalAnswer: g[g.length - 1]!.content })).toMatchObject({ score: 1 });
    }
  });

  it("checks the last Answer line with normalisation", async () => {
    const t = env.tasks(1, 3)[0]!;
    const a = String(t.meta.answer);
    const score = async (s: string): Promise<number> => (await env.check(t, { finalAnswer: s })).score;
    expect(await score(`Answer: ${a}`)).toBe(1);
    expect(await score(`Answer:  The ${a.toUpperCase()}.`)).toBe(1);
    expect(await score(`Answer: ${a}\nAnswer: something else`)).toBe(0);
    expect(await score(a)).toBe(0);
    expect(normalizeAnswer("The  Amber-Sea!")).toBe("amber sea");
    expect(normalizeAnswer("12,400")).toBe("12400");
    expect(extractAnswer("x\nAnswer: \n")).toBeUndefined();
  });

  it("a program's variant sets how much search shows", async () => {
    const t = env.tasks(1, 2)[0]!;
    const variants = env.variants!();
    const titles = variants.find((v) => v.id === "titles-only")!;
    const sb = fakeSandbox("p1");
    expect(await env.setup(t, sb, { variant: titles })).toEqual({ variant: "titles-only" });
    const search = env.tools().find((x) => x.name === "search")!;
    const out = (await search.run("river", sb)).output.split("\n");
    expect(out).toHaveLength(5);
    expect(out.every((l) => /^\[doc-\d{4}\] [^:]+$/.test(l))).toBe(true);
    const sb3 = fakeSandbox("p2");
    await env.setup(t, sb3, { variant: variants.find((v) => v.id === "top3-long")! });
    expect((await search.run("river", sb3)).output.split("\n")).toHaveLength(3);
  });
});
