// The search-qa tools: `search` (BM25 top-k over the corpus, ids and snippets) and `open` (a whole
// document). They read only the shipped corpus, so they run in the host process; the program's
// variant sets how many results and how much snippet a search shows.
import type { Sandbox } from "../../sandbox/sandbox.js";
import type { Tool, ToolResult } from "../env.js";
import { Bm25Index } from "./bm25.js";
import { corpus, type Doc } from "./corpus.js";

export interface SearchConfig {
  topK: number;
  /** Characters of each snippet; 0 shows titles only. */
  snippetChars: number;
}

export const DEFAULT_SEARCH: SearchConfig = { topK: 5, snippetChars: 120 };
const MAX_QUERY = 300;

let index: Bm25Index<Doc> | undefined;
/** The shared index over the corpus. */
export function searchIndex(): Bm25Index<Doc> {
  index ??= new Bm25Index(corpus().docs);
  return index;
}

/** What `search` prints for a query. */
export function searchOutput(query: string, cfg: SearchConfig): ToolResult {
  const q = query.trim();
  if (q === "") return { ok: false, output: "search: empty query" };
  if (q.length > MAX_QUERY) return { ok: false, output: `search: query too long (${q.length} chars, max ${MAX_QUERY})` };
  const hits = searchIndex().search(q, cfg.topK);
  if (hits.length === 0) return { ok: true, output: "no results" };
  const lines = hits.map(({ doc }) => {
    if (cfg.snippetChars === 0) return `[${doc.id}] ${doc.title}`;
    const snip = doc.text.length > cfg.snippetChars ? `${doc.text.slice(0, cfg.snippetChars)}…` : doc.text;
    return `[${doc.id}] ${doc.title}: ${snip}`;
  });
  return { ok: true, output: lines.join("\n") };
}

/** What `open` prints for a document id. */
export function openOutput(input: string): ToolResult {
  const id = input.trim().replace(/^\[|\]$/g, "");
  const doc = corpus().docs.find((d) => d.id === id);
  if (!doc) return { ok: false, output: `open: no document '${id}' (ids look like doc-0042)` };
  return { ok: true, output: `# ${doc.title}\n\n${doc.text}` };
}

/** The tools, bound to a lookup of each sandbox's search configuration. */
export function createSearchTools(configOf: (sandbox: Sandbox) => SearchConfig): Tool[] {
  return [
    {
      name: "search",
      description: "Search the document collection; returns the best matching document ids, titles and snippets.",
      run: async (input, sandbox) => searchOutput(input, configOf(sandbox)),
    },
    {
      name: "open",
      description: "Show a whole document by id (e.g. doc-0042).",
      run: async (input) => openOutput(input),
    },
  ];
}
