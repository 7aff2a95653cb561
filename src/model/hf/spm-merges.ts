// BPE merges of a SentencePiece vocabulary, derived from the pieces and their scores exactly as
// transformers' `generate_merges` (convert_slow_tokenizer.py, used by LlamaConverter) derives them, so
// an exported SPM tokenizer.json merges as HF's own Llama conversion does. And back: piece scores from
// merge ranks, an order llama.cpp's SPM tokenizer (highest score merges first) follows identically.

/**
 * Merges of `pieces` (in id order) with `scores`: every split of a piece into two pieces of the
 * vocabulary is a merge; a piece's splits are ordered by the ids of their parts; all merges are then
 * stably sorted by (score of the merged piece, length of left, length of right), descending.
 * Lengths count code points, as Python's `len` does.
 */
export function spmMerges(pieces: readonly string[], scores: readonly number[]): [string, string][] {
  const vocab = new Map<string, number>();
  pieces.forEach((p, i) => {
    if (!vocab.has(p)) vocab.set(p, i);
  });
  // Python's dict(vocab_scores): the first occurrence keeps its place, the last one its score.
  const scoreOf = new Map<string, number>();
  pieces.forEach((p, i) => scoreOf.set(p, scores[i] ?? 0));
  const merges: { l: string; r: string; score: number; ll: number; rl: number }[] = [];
  for (const piece of vocab.keys()) {
    const chars = Array.from(piece);
    const local: { l: string; r: string }[] = [];
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join("");
      const r = chars.slice(k).join("");
      if (vocab.has(l) && vocab.has(r)) local.push({ l, r });
    }
    local.sort((a, b) => (vocab.get(a.l) as number) - (vocab.get(b.l) as number) || (vocab.get(a.r) as number) - (vocab.get(b.r) as number));
    const score = scoreOf.get(piece) as number;
    for (const m of local) merges.push({ ...m, score, ll: Array.from(m.l).length, rl: Array.from(m.r).length });
  }
  // Array.prototype.sort is stable; Python's sorted(reverse=True) keeps equal keys in input order too.
  merges.sort((a, b) => b.score - a.score || b.ll - a.ll || b.rl - a.rl);
  return merges.map((m) => [m.l, m.r]);
}

/**
 * SPM scores of `pieces` from BPE merges (highest priority first): a piece made by merge k scores
 * -(k+1), the first merge that makes it counts; pieces no merge makes score 0.
 */
export function scoresFromMerges(pieces: readonly string[], merges: readonly (readonly [string, string])[]): number[] {
  const rank = new Map<string, number>();
  merges.forEach(([l, r], k) => {
    const piece = l + r;
    if (!rank.has(piece)) rank.set(piece, k);
  });
  return pieces.map((p) => {
    const k = rank.get(p);
    return k === undefined ? 0 : -(k + 1);
  });
}
