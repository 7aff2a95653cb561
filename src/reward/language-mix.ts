// Language-mixing detector for the process reward: classifies every letter of the model's prose by
// Unicode script (Latin, Cyrillic, CJK, …) and flags text where a second script takes a real share
// of the letters, or where one word mixes scripts (e.g. a Cyrillic "е" inside a Latin word). Tool
// calls, code and URLs are ignored: commands and identifiers are Latin whatever the prose language.
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";

/** Script groups; Han, Hiragana and Katakana are one group because Japanese prose uses all three. */
export type ScriptGroup = "latin" | "cyrillic" | "greek" | "cjk" | "hangul" | "arabic" | "hebrew" | "devanagari" | "thai" | "other";

const SCRIPTS: [ScriptGroup, RegExp][] = [
  ["latin", /\p{Script=Latin}/u],
  ["cyrillic", /\p{Script=Cyrillic}/u],
  ["greek", /\p{Script=Greek}/u],
  ["cjk", /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Bopomofo}]/u],
  ["hangul", /\p{Script=Hangul}/u],
  ["arabic", /\p{Script=Arabic}/u],
  ["hebrew", /\p{Script=Hebrew}/u],
  ["devanagari", /\p{Script=Devanagari}/u],
  ["thai", /\p{Script=Thai}/u],
];

export interface LanguageMixReport {
  /** Letters per script group. */
  letters: Partial<Record<ScriptGroup, number>>;
  /** The script group with the most letters (undefined for text without letters). */
  dominant?: ScriptGroup;
  /** Letters outside the dominant group. */
  minorityLetters: number;
  /** minorityLetters / all letters (0 for text without letters). */
  minorityFraction: number;
  /** Words whose letters come from two or more script groups. */
  mixedWords: string[];
}

export interface LanguageMixOptions {
  /** A second script must have at least this many letters … (default 4) */
  minLetters?: number;
  /** … and this share of all letters to count as mixing (default 0.05). */
  minFraction?: number;
}

const TOOL_SPAN = new RegExp(`${escape(TOOL_CALL_OPEN)}[\\s\\S]*?(?:${escape(TOOL_CALL_CLOSE)}|$)`, "g");
const CODE_FENCE = /```[\s\S]*?(?:```|$)/g;
const INLINE_CODE = /`[^`\n]*`/g;
const URL = /\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function scriptOf(ch: string): ScriptGroup {
  for (const [group, re] of SCRIPTS) if (re.test(ch)) return group;
  return "other";
}

/** The prose of a model output: tool calls, code and URLs removed. */
export function proseOf(text: string): string {
  return text.replace(TOOL_SPAN, " ").replace(CODE_FENCE, " ").replace(INLINE_CODE, " ").replace(URL, " ");
}

/** Count letters by script in the prose of `text`. */
export function analyzeLanguageMix(text: string): LanguageMixReport {
  const letters: Partial<Record<ScriptGroup, number>> = {};
  const mixedWords: string[] = [];
  let total = 0;
  for (const [word] of proseOf(text).matchAll(/[\p{L}\p{M}]+/gu)) {
    const inWord = new Set<ScriptGroup>();
    for (const ch of word) {
      if (!/\p{L}/u.test(ch)) continue; // combining marks belong to the letter before them
      const g = scriptOf(ch);
      letters[g] = (letters[g] ?? 0) + 1;
      inWord.add(g);
      total++;
    }
    if (inWord.size > 1) mixedWords.push(word);
  }
  let dominant: ScriptGroup | undefined;
  for (const [g, n] of Object.entries(letters) as [ScriptGroup, number][]) if (dominant === undefined || n > (letters[dominant] ?? 0)) dominant = g;
  const minorityLetters = total - (dominant ? (letters[dominant] ?? 0) : 0);
  return { letters, ...(dominant ? { dominant } : {}), minorityLetters, minorityFraction: total === 0 ? 0 : minorityLetters / total, mixedWords };
}

/** True when the prose of `text` mixes languages (see {@link LanguageMixOptions}). */
export function isLanguageMixed(text: string, opts: LanguageMixOptions = {}): boolean {
  const r = analyzeLanguageMix(text);
  if (r.mixedWords.length > 0) return true;
  return r.minorityLetters >= (opts.minLetters ?? 4) && r.minorityFraction >= (opts.minFraction ?? 0.05);
}
