// The search-qa corpus: a few hundred short encyclopedia-style documents about an invented world
// (towns, rivers, people, companies, festivals), generated deterministically from a fixed seed so
// every machine sees the same corpus, with the facts the questions are built from.
import { Rng } from "../../core/rng.js";

export interface Doc {
  id: string;
  title: string;
  text: string;
}

export interface Town { name: string; region: string; founded: number; population: number; river: string; docId: string }
export interface River { name: string; lengthKm: number; sea: string; source: string; docId: string }
export interface Person { name: string; born: number; town: string; profession: string; docId: string }
export interface Company { name: string; founder: string; town: string; founded: number; product: string; docId: string }
export interface Festival { name: string; town: string; month: string; docId: string }

export interface Corpus {
  docs: Doc[];
  towns: Town[];
  rivers: River[];
  people: Person[];
  companies: Company[];
  festivals: Festival[];
}

const CORPUS_SEED = 20_260_501;
const ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "tr", "sk"];
const VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"];
const CODAS = ["", "", "n", "r", "l", "s", "th", "nd", "rk"];
const REGIONS = ["Aldmere", "Brightholm", "Coldwater", "Duskvale", "Eastmarch", "Fernreach", "Greyhaven", "Highmoor"];
const SEAS = ["Amber Sea", "Glass Sea", "Northern Gulf", "Sea of Reeds", "Salt Bay"];
const PROFESSIONS = ["cartographer", "glassblower", "composer", "astronomer", "shipwright", "botanist", "engineer", "poet", "clockmaker", "physician"];
const PRODUCTS = ["lanterns", "rope", "telescopes", "printing presses", "bicycles", "ceramic tiles", "pocket watches", "sailcloth", "radios", "barometers"];
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const FILLER = [
  "Local records from the period are incomplete, and several archives were lost in a fire.",
  "Travellers often describe the surrounding countryside as flat and windswept.",
  "The area is known for its markets, which draw traders from neighbouring regions.",
  "Historians disagree about the origin of the name.",
  "A small museum keeps letters, maps and tools from the early years.",
  "The winters are long, and the roads were unpaved until late in the last century.",
  "Several streets were renamed after a municipal reform.",
  "Many residents work in agriculture, fishing or small workshops.",
];

function word(rng: Rng, syllables: number): string {
  let w = "";
  for (let i = 0; i < syllables; i++) w += rng.pick(ONSETS) + rng.pick(VOWELS) + (i === syllables - 1 ? rng.pick(CODAS) : "");
  return w[0]?.toUpperCase() + w.slice(1);
}

function uniqueNames(rng: Rng, n: number, make: () => string, used: Set<string>): string[] {
  const out: string[] = [];
  while (out.length < n) {
    const name = make();
    if (used.has(name.toLowerCase())) continue;
    used.add(name.toLowerCase());
    out.push(name);
  }
  return out;
}

function filler(rng: Rng, k: number): string {
  const picked = new Set<string>();
  while (picked.size < k) picked.add(rng.pick(FILLER));
  return [...picked].join(" ");
}

let cached: Corpus | undefined;

/** The corpus (built once per process). */
export function corpus(): Corpus {
  if (cached) return cached;
  const rng = new Rng(CORPUS_SEED);
  const used = new Set<string>();
  const docs: Doc[] = [];
  const add = (title: string, text: string): string => {
    const id = `doc-${String(docs.length + 1).padStart(4, "0")}`;
    docs.push({ id, title, text });
    return id;
  };
  const riverNames = uniqueNames(rng, 30, () => `${word(rng, 2)} River`, used);
  const mountains = uniqueNames(rng, 30, () => `Mount ${word(rng, 2)}`, used);
  const townNames = uniqueNames(rng, 80, () => word(rng, rng.int(2, 3)), used);
  const personNames = uniqueNames(rng, 80, () => `${word(rng, 2)} ${word(rng, 2)}`, used);
  const companyNames = uniqueNames(rng, 50, () => `${word(rng, 2)} ${rng.pick(["Works", "Company", "Brothers", "Foundry", "Guild"])}`, used);
  const festivalNames = uniqueNames(rng, 40, () => `${word(rng, 2)} Festival`, used);

  const rivers: River[] = riverNames.map((name, i) => {
    const r = { name, lengthKm: rng.int(40, 900), sea: rng.pick(SEAS), source: mountains[i] as string, docId: "" };
    r.docId = add(name, `The ${name} is a river about ${r.lengthKm} km long. It rises on the slopes of ${r.source} and flows into the ${r.sea}. ${filler(rng, 2)}`);
    return r;
  });
  const towns: Town[] = townNames.map((name) => {
    const river = rng.pick(rivers);
    const t = { name, region: rng.pick(REGIONS), founded: rng.int(900, 1850), population: rng.int(800, 250_000), river: river.name, docId: "" };
    t.docId = add(
      name,
      `${name} is a town in the region of ${t.region}. It was founded in ${t.founded} on the banks of the ${t.river}. ` +
        `Its population is ${t.population}. ${filler(rng, 3)}`,
    );
    return t;
  });
  const people: Person[] = personNames.map((name) => {
    const p = { name, born: rng.int(1700, 1990), town: rng.pick(towns).name, profession: rng.pick(PROFESSIONS), docId: "" };
    p.docId = add(name, `${name} (born ${p.born}) is a ${p.profession} from ${p.town}. ${filler(rng, 2)}`);
    return p;
  });
  const companies: Company[] = companyNames.map((name) => {
    const founder = rng.pick(people);
    const c = { name, founder: founder.name, town: rng.pick(towns).name, founded: rng.int(Math.max(founder.born + 18, 1720), 2020), product: rng.pick(PRODUCTS), docId: "" };
    c.docId = add(name, `${name} is a maker of ${c.product}, founded in ${c.founded} by ${c.founder}. Its headquarters are in ${c.town}. ${filler(rng, 2)}`);
    return c;
  });
  const festivals: Festival[] = festivalNames.map((name) => {
    const f = { name, town: rng.pick(towns).name, month: rng.pick(MONTHS), docId: "" };
    f.docId = add(name, `The ${name} is held every ${f.month} in ${f.town}. ${filler(rng, 2)}`);
    return f;
  });
  for (const region of REGIONS) {
    const inRegion = towns.filter((t) => t.region === region).map((t) => t.name);
    add(`${region} (region)`, `${region} is a region with ${inRegion.length} towns, among them ${inRegion.slice(0, 4).join(", ")}. ${filler(rng, 2)}`);
  }
  cached = { docs, towns, rivers, people, companies, festivals };
  return cached;
}
