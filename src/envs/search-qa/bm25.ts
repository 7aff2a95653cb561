// BM25 ranking (Robertson/Spärck Jones, k1 = 1.2, b = 0.75) over a fixed document set, with the
// title counted three times so a document about an entity outranks documents that mention it.

export interface Indexable {
  id: string;
  title: string;
  text: string;
}

/** Lower-cased alphanumeric tokens. */
export function tokenize(s: string): string[] {
  return s.toLowerCase().match(/[a-z0-9]+/g) ?? [];
}

const K1 = 1.2;
const B = 0.75;
const TITLE_WEIGHT = 3;

/** An immutable BM25 index. */
export class Bm25Index<D extends Indexable> {
  private readonly tf: Map<string, number>[];
  private readonly lengths: number[];
  private readonly df = new Map<string, number>();
  private readonly avgLen: number;

  constructor(readonly docs: readonly D[]) {
    this.tf = docs.map((d) => {
      const m = new Map<string, number>();
      const tokens = [...Array.from({ length: TITLE_WEIGHT }, () => tokenize(d.title)).flat(), ...tokenize(d.text)];
      for (const t of tokens) m.set(t, (m.get(t) ?? 0) + 1);
      return m;
    });
    this.lengths = this.tf.map((m) => [...m.values()].reduce((a, b) => a + b, 0));
    for (const m of this.tf) for (const t of m.keys()) this.df.set(t, (this.df.get(t) ?? 0) + 1);
    this.avgLen = this.lengths.reduce((a, b) => a + b, 0) / Math.max(1, docs.length);
  }

  /** The best `k` documents for `query` with their scores (ties broken by document order). */
  search(query: string, k: number): { doc: D; score: number }[] {
    const terms = [...new Set(tokenize(query))];
    const n = this.docs.length;
    const scored: { doc: D; score: number; i: number }[] = [];
    this.tf.forEach((m, i) => {
      let score = 0;
      for (const t of terms) {
        const f = m.get(t);
        if (!f) continue;
        const df = this.df.get(t) ?? 0;
        const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
        score += (idf * f * (K1 + 1)) / (f + K1 * (1 - B + (B * (this.lengths[i] as number)) / this.avgLen));
      }
      if (score > 0) scored.push({ doc: this.docs[i] as D, score, i });
    });
    scored.sort((a, b) => b.score - a.score || a.i - b.i);
    return scored.slice(0, k).map(({ doc, score }) => ({ doc, score }));
  }
}
