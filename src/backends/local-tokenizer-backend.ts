// A token backend whose tokenize and detokenize run in the gateway's process with the served model's
// own tokenizer and template (local-tokenizer.ts), so the token path makes one upstream call per chat
// turn (generate) instead of three (/tokenize, generate, /detokenize). The ids must be exactly the
// engine's: before its first answer the backend asks the engine's /tokenize and /detokenize for a probe
// conversation and a text, and refuses every call (naming the difference) when the local ids differ —
// a wrong tokenizer file would otherwise build prompts the engine never made. The probe also gives the
// engine's context length (max_model_len), which local answers report as the engine's would.
import { BackendProtocolError, type TokenBackend, type TokenizeRequest, type TokenizeResult } from "./backend.js";
import type { LocalTokenizer } from "./local-tokenizer.js";
import { ArborError } from "../core/errors.js";

/** The local tokenizer and the engine disagree (config `backends[].tokenizer` names another model's tokenizer). */
export class TokenizerMismatchError extends BackendProtocolError {}

/** What the probe sends: plain turns both ways, and a text (with BOS where the tokenizer adds one). */
const PROBE_CHAT = [
  { role: "system" as const, content: "You are a careful assistant. Answer briefly." },
  { role: "user" as const, content: "What is 12 + 30? Reply in words, e.g. «forty-two».\n" },
  { role: "assistant" as const, content: "Forty-two — quarante-deux 🙂" },
  { role: "user" as const, content: "Thanks!  And 7 * 6?" },
];
const PROBE_TEXT = "Plain text: naïve café, 42 + 7 = 49.\n\tdef f(x):\n\t\treturn x  # done";

/**
 * Wrap `backend` (a vLLM-protocol token backend with /tokenize and /detokenize) so that its tokenize and
 * detokenize answer from `local`, checked against the engine once (see the file header).
 */
export function withLocalTokenizer(backend: TokenBackend, local: LocalTokenizer): TokenBackend {
  const upTokenize = backend.tokenize;
  const upDetokenize = backend.detokenize;
  if (!upTokenize || !upDetokenize) throw new ArborError(`backend '${backend.name}' tokenizer: type ${backend.type} has no /tokenize to check a local tokenizer against`, "config");
  const engineTokenize = (req: TokenizeRequest): Promise<TokenizeResult> => upTokenize.call(backend, req);
  const engineDetokenize = (ids: number[], signal?: AbortSignal): Promise<string> => upDetokenize.call(backend, ids, signal);
  // Settles once per backend: a mismatch stays (every call refused); a failed probe (engine down) is retried by the next call.
  let checked: Promise<number | null> | undefined;
  const check = (signal?: AbortSignal): Promise<number | null> => {
    checked ??= probe(backend, local, engineTokenize, engineDetokenize, signal).catch((e: unknown) => {
      if (!(e instanceof TokenizerMismatchError)) checked = undefined;
      throw e;
    });
    return checked;
  };
  return {
    ...backend,
    async tokenize(req: TokenizeRequest): Promise<TokenizeResult> {
      const maxModelLen = await check(req.signal);
      const ids = local.tokenize(req);
      return ids !== undefined ? { tokens: ids, maxModelLen } : engineTokenize(req);
    },
    async detokenize(tokenIds: number[], signal?: AbortSignal): Promise<string> {
      await check(signal);
      return local.detokenize(tokenIds) ?? engineDetokenize(tokenIds, signal);
    },
  };
}

/** Ask the engine for the probe's ids and texts and compare; resolves with its max_model_len. */
async function probe(
  backend: TokenBackend,
  local: LocalTokenizer,
  tokenize: (req: TokenizeRequest) => Promise<TokenizeResult>,
  detokenize: (ids: number[], signal?: AbortSignal) => Promise<string>,
  signal?: AbortSignal,
): Promise<number | null> {
  const reqs: [string, TokenizeRequest][] = [
    ["a 4-turn conversation with the generation prompt", { messages: PROBE_CHAT, addGenerationPrompt: true, signal }],
    ["a 3-turn conversation without the generation prompt", { messages: PROBE_CHAT.slice(0, 3), addGenerationPrompt: false, signal }],
    ["a plain text with special tokens added", { text: PROBE_TEXT, addSpecialTokens: true, signal }],
  ];
  const answers = await Promise.all(reqs.map(([, r]) => tokenize(r)));
  const mismatch = (answer: string, engine: unknown, here: unknown): TokenizerMismatchError =>
    new TokenizerMismatchError(
      backend.name,
      backend.url,
      `${answer} ${JSON.stringify(engine)} but the local tokenizer ${local.source} (config backends[].tokenizer) gives ${JSON.stringify(here)}: it is not the served model's tokenizer, and the gateway will not build prompts with it`,
    );
  for (const [k, [what, req]] of reqs.entries()) {
    const engine = (answers[k] as TokenizeResult).tokens;
    const here = local.tokenize(req);
    if (here === undefined || !sameIds(engine, here)) throw mismatch(`tokenizes ${what} as`, clip(engine), here && clip(here));
  }
  const ids = (answers[0] as TokenizeResult).tokens;
  const text = await detokenize(ids, signal);
  const here = local.detokenize(ids);
  if (here !== text) throw mismatch("detokenizes the probe's ids as", text, here);
  return (answers[0] as TokenizeResult).maxModelLen;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** At most 64 ids of a list for an error message. */
function clip(ids: readonly number[]): (number | string)[] {
  return ids.length <= 64 ? [...ids] : [...ids.slice(0, 64), `… ${ids.length} ids`];
}
