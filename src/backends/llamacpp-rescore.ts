// Per-token logprobs llama-server leaves out. It records a token's probabilities only when the text
// generated so far does not end inside a UTF-8 sequence (tools/server/server-context.cpp,
// process_token: add_token only when !incomplete), so the byte tokens of a multi-byte character, or
// stray bytes from a small policy, come back without any. When an answer's completion_probabilities
// do not line up with its tokens, every output position is scored again here: one 1-token
// /completion per position on the same slot (its prefix is cached, so one token is evaluated),
// reading the pre-sampling (raw) distribution. The token sampled by that request is forced to EOS
// with logit_bias: EOS adds no text, so its probabilities are always recorded, and logit_bias acts in
// the sampler chain, after the raw probabilities are read.

export interface RescoreRequest {
  prompt: number[];
  output: number[];
  /** The output positions to score (default: all). */
  positions?: number[];
  temperature: number;
  topP: number;
  idSlot: number;
  signal?: AbortSignal;
}

export interface RescoreDeps {
  /** POST a /completion body; resolves with the parsed answer (errors thrown as Backend errors). */
  complete(body: object, signal?: AbortSignal): Promise<unknown>;
  /** The model's EOS token id. */
  eosId(): Promise<number>;
  /** Extra fields every /completion body carries (the chat_parser workaround). */
  extra: object;
  /** Thrown for an answer without what is needed. */
  protocolError(problem: string): Error;
}

/** More than any vocabulary: the server caps n_probs at the vocabulary size, giving the whole distribution. */
const WHOLE_VOCAB = 1 << 24;
/** Greedy tokens are the argmax: a short top list holds them unless two logits tie. */
const GREEDY_TOP = 8;

/**
 * The logprob of each output token (at `positions`, in that order) under the request's policy: the
 * raw logprob when greedy, else log softmax(raw / T) renormalised over the top-p nucleus, as
 * llama.cpp's temperature + top_p + dist chain computes it.
 */
export async function rescoreLogprobs(deps: RescoreDeps, req: RescoreRequest): Promise<number[]> {
  const eos = await deps.eosId();
  const out: number[] = [];
  for (const i of req.positions ?? req.output.map((_, k) => k)) {
    const tok = req.output[i] as number;
    const prefix = [...req.prompt, ...req.output.slice(0, i)];
    let raw = await distribution(deps, prefix, req, eos, req.temperature > 0 ? WHOLE_VOCAB : GREEDY_TOP);
    if (req.temperature === 0 && !raw.has(tok)) raw = await distribution(deps, prefix, req, eos, WHOLE_VOCAB);
    const lp = raw.get(tok);
    if (lp === undefined) throw deps.protocolError(`gave no probability for output token ${i} (id ${tok}) when scored again`);
    out.push(req.temperature > 0 ? policyLogprob(raw, tok, req.temperature, req.topP, i, deps) : lp);
  }
  return out;
}

async function distribution(deps: RescoreDeps, prefix: number[], req: RescoreRequest, eos: number, nProbs: number): Promise<Map<number, number>> {
  const body = {
    ...deps.extra,
    prompt: prefix,
    n_predict: 1,
    temperature: 0,
    samplers: ["temperature"],
    n_probs: nProbs,
    logit_bias: [[eos, 1000]],
    cache_prompt: true,
    return_tokens: true,
    stream: false,
    id_slot: req.idSlot,
  };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const json: any = await deps.complete(body, req.signal);
  const top = json?.completion_probabilities?.[0]?.top_logprobs;
  if (!Array.isArray(top)) throw deps.protocolError("answered a scoring /completion without completion_probabilities[0].top_logprobs");
  const m = new Map<number, number>();
  for (const e of top) if (Number.isInteger(e?.id) && typeof e?.logprob === "number") m.set(e.id, e.logprob);
  return m;
}

/** log p(tok) after temperature and top-p, from the whole raw distribution. */
function policyLogprob(raw: Map<number, number>, tok: number, temperature: number, topP: number, i: number, deps: RescoreDeps): number {
  const ids = [...raw.keys()];
  const scaled = ids.map((id) => (raw.get(id) as number) / temperature);
  const max = Math.max(...scaled);
  const logZ = max + Math.log(scaled.reduce((a, x) => a + Math.exp(x - max), 0));
  const lpT = (raw.get(tok) as number) / temperature - logZ;
  if (topP >= 1) return lpT;
  // llama.cpp's top_p keeps the most likely tokens until their mass reaches p (at least one).
  const order = ids.map((id, k) => ({ id, lp: (scaled[k] as number) - logZ })).sort((a, b) => b.lp - a.lp);
  let mass = 0;
  let kept = false;
  for (const e of order) {
    mass += Math.exp(e.lp);
    if (e.id === tok) kept = true;
    if (mass >= topP) break;
  }
  if (!kept) throw deps.protocolError(`sampled output token ${i} (id ${tok}) outside the top-p ${topP} nucleus it was drawn from`);
  return lpT - Math.log(mass);
}

/**
 * Which output position each completion_probabilities entry belongs to, when that is certain: the
 * entries are the tokens minus those the server skipped, in order, so matching ids from the front
 * and from the back must give the same placement (they differ only around repeated ids, e.g. two
 * equal byte tokens of which one was skipped). Undefined when the entries do not fit or are ambiguous.
 */
export function placeEntries(entryIds: readonly unknown[], ids: readonly number[]): number[] | undefined {
  const front: number[] = [];
  for (let i = 0, j = 0; i < ids.length && j < entryIds.length; i++) if (entryIds[j] === ids[i]) front[j++] = i;
  if (front.length !== entryIds.length) return undefined;
  const back: number[] = [];
  for (let i = ids.length - 1, j = entryIds.length - 1; i >= 0 && j >= 0; i--) if (entryIds[j] === ids[i]) back[j--] = i;
  return front.every((i, j) => back[j] === i) ? front : undefined;
}
