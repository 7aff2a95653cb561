// search-qa questions: one- and two-hop questions over the corpus facts, each with its exact answer
// and the documents (and the query that finds each) a golden solution reads.
import { Rng } from "../../core/rng.js";
import { corpus, type Corpus } from "./corpus.js";

export interface Hop {
  query: string;
  docId: string;
}

export interface Question {
  kind: string;
  question: string;
  answer: string;
  hops: Hop[];
}

type Template = (c: Corpus, rng: Rng) => Question;

const TEMPLATES: Template[] = [
  (c, rng) => {
    const t = rng.pick(c.towns);
    return { kind: "town-founded", question: `In which year was the town of ${t.name} founded?`, answer: String(t.founded), hops: [{ query: t.name, docId: t.docId }] };
  },
  (c, rng) => {
    const t = rng.pick(c.towns);
    return { kind: "town-river", question: `Which river flows through ${t.name}?`, answer: t.river, hops: [{ query: t.name, docId: t.docId }] };
  },
  (c, rng) => {
    const r = rng.pick(c.rivers);
    return { kind: "river-sea", question: `Into which sea does the ${r.name} flow?`, answer: r.sea, hops: [{ query: r.name, docId: r.docId }] };
  },
  (c, rng) => {
    const p = rng.pick(c.people);
    return { kind: "person-profession", question: `What is the profession of ${p.name}?`, answer: p.profession, hops: [{ query: p.name, docId: p.docId }] };
  },
  (c, rng) => {
    const co = rng.pick(c.companies);
    return { kind: "company-founder", question: `Who founded ${co.name}?`, answer: co.founder, hops: [{ query: co.name, docId: co.docId }] };
  },
  (c, rng) => {
    const f = rng.pick(c.festivals);
    return { kind: "festival-month", question: `In which month is the ${f.name} held?`, answer: f.month, hops: [{ query: f.name, docId: f.docId }] };
  },
  (c, rng) => {
    const co = rng.pick(c.companies);
    const p = c.people.find((x) => x.name === co.founder);
    if (!p) throw new Error(`corpus: founder ${co.founder} has no document`);
    return {
      kind: "founder-birthplace",
      question: `In which town was the founder of ${co.name} born?`,
      answer: p.town,
      hops: [
        { query: co.name, docId: co.docId },
        { query: p.name, docId: p.docId },
      ],
    };
  },
  (c, rng) => {
    const t = rng.pick(c.towns);
    const r = c.rivers.find((x) => x.name === t.river);
    if (!r) throw new Error(`corpus: river ${t.river} has no document`);
    return {
      kind: "town-river-sea",
      question: `Into which sea does the river that flows through ${t.name} empty?`,
      answer: r.sea,
      hops: [
        { query: t.name, docId: t.docId },
        { query: r.name, docId: r.docId },
      ],
    };
  },
  (c, rng) => {
    const f = rng.pick(c.festivals);
    const t = c.towns.find((x) => x.name === f.town);
    if (!t) throw new Error(`corpus: town ${f.town} has no document`);
    return {
      kind: "festival-region",
      question: `In which region is the town that hosts the ${f.name}?`,
      answer: t.region,
      hops: [
        { query: f.name, docId: f.docId },
        { query: t.name, docId: t.docId },
      ],
    };
  },
];

/** Question `i` for `seed` (depends only on both, so longer lists extend shorter ones). */
export function questionFor(seed: number, i: number): Question {
  const rng = new Rng(seed).fork(`search-qa-${i}`);
  return (rng.pick(TEMPLATES) as Template)(corpus(), rng);
}
