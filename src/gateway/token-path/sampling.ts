// The client's OpenAI sampling fields mapped onto a token-level generate request. Only what the
// token path can honour exactly is accepted; anything else is a 400 naming the field, because a
// silently ignored sampling control would make the recorded behaviour policy wrong. vLLM's
// logit_bias, repetition_penalty, min_tokens and ignore_eos go to backends that list them
// (TokenBackend.samplingControls); token-call.ts refuses them for any other backend.
import { budgetField, type ClientFieldNames, type Endpoint } from "../openai-request.js";
import { InvalidRequestError } from "../http-errors.js";
import { checkServedFields } from "./served-fields.js";

/** The sampling part of one call, before stop strings are turned into token ids. */
export interface TokenSampling {
  /** Tokens to generate at most; undefined = up to the engine's context (chat without max_tokens). */
  maxTokens: number | undefined;
  /** The client's name of that field (max_tokens, max_completion_tokens, max_output_tokens), for errors naming it. */
  maxTokensField: string;
  temperature: number;
  topP?: number;
  seed?: number;
  /** Stop strings; each must be one token of the engine's vocabulary. */
  stop: string[];
  /** The client's name of the stop field (stop; Anthropic's stop_sequences), for errors naming it. */
  stopField: string;
  /** Stop token ids the client gave directly (vLLM's `stop_token_ids`). */
  stopTokenIds: number[];
  /** vLLM's logit_bias (token id string → bias), repetition_penalty, min_tokens and ignore_eos, when set. */
  logitBias?: Record<string, number>;
  repetitionPenalty?: number;
  minTokens?: number;
  ignoreEos?: boolean;
  /** The client asked for logprobs (chat `logprobs: true`, completions `logprobs: 0`). */
  logprobs: boolean;
  /** `model` to echo in the answer. */
  model: string;
}

/** Completions' OpenAI default; chat has none (up to the context). */
const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

const absent = (v: unknown): boolean => v === undefined || v === null;

/**
 * Map and check a request body's sampling fields (`clientWantsLogprobs` as prepareRequest read it;
 * `names`: the client's own names of fields a surface translated, e.g. the Responses API's
 * max_output_tokens). Throws {@link InvalidRequestError} naming the field.
 */
export function tokenSampling(endpoint: Endpoint, body: Record<string, unknown>, clientWantsLogprobs: boolean, names: ClientFieldNames = {}): TokenSampling {
  const bad = (field: string, why: string): never => {
    throw new InvalidRequestError(field, why);
  };
  checkServedFields(endpoint, body);
  const onlyDefault = (field: string, ok: (v: unknown) => boolean, why: string): void => {
    if (!absent(body[field]) && !ok(body[field])) bad(field, why);
  };
  onlyDefault("presence_penalty", (v) => v === 0, "is not supported on the token path (must be 0)");
  onlyDefault("frequency_penalty", (v) => v === 0, "is not supported on the token path (must be 0)");
  onlyDefault("response_format", (v) => (v as { type?: unknown }).type === "text", "only {type: 'text'} is supported on the token path (no constrained decoding)");
  onlyDefault("suffix", (v) => v === "", "is not supported on the token path");
  // Anthropic's top_k arrives here too (surfaces/anthropic-request.ts): no engine path takes it yet.
  onlyDefault("top_k", (v) => v === 0 || v === -1, "is not supported on the token path (0 or -1: disabled)");
  onlyDefault("min_p", (v) => v === 0, "is not supported on the token path (must be 0)");

  const bodyField = budgetField(endpoint, body);
  const maxField = names.max_tokens ?? bodyField;
  const rawMax = body[bodyField];
  let maxTokens: number | undefined;
  if (absent(rawMax)) maxTokens = endpoint === "completions" ? COMPLETIONS_DEFAULT_MAX_TOKENS : undefined;
  else if (Number.isInteger(rawMax) && (rawMax as number) >= 1) maxTokens = rawMax as number;
  else bad(maxField, `must be an integer >= 1, got ${JSON.stringify(rawMax)}`);

  const temperature = absent(body.temperature) ? 1 : body.temperature;
  if (!(typeof temperature === "number" && temperature >= 0 && temperature <= 100)) bad("temperature", `must be a number in [0, 100], got ${JSON.stringify(body.temperature)}`);
  const out: TokenSampling = { maxTokens, maxTokensField: maxField, temperature: temperature as number, stop: [], stopField: names.stop ?? "stop", stopTokenIds: [], logprobs: false, model: typeof body.model === "string" ? body.model : "arbor" };
  if (!absent(body.top_p)) {
    if (!(typeof body.top_p === "number" && body.top_p > 0 && body.top_p <= 1)) bad("top_p", `must be a number in (0, 1], got ${JSON.stringify(body.top_p)}`);
    out.topP = body.top_p as number;
  }
  if (!absent(body.seed)) {
    if (!Number.isSafeInteger(body.seed)) bad("seed", `must be an integer, got ${JSON.stringify(body.seed)}`);
    out.seed = body.seed as number;
  }
  if (!absent(body.stop)) {
    const stop = typeof body.stop === "string" ? [body.stop] : body.stop;
    if (!Array.isArray(stop) || !stop.every((s) => typeof s === "string" && s !== "")) bad(out.stopField, "must be a non-empty string or a list of them");
    out.stop = stop as string[];
  }
  if (!absent(body.stop_token_ids)) {
    const ids = body.stop_token_ids;
    if (!Array.isArray(ids) || !ids.every((t) => Number.isInteger(t) && t >= 0)) bad("stop_token_ids", "must be a list of token ids (integers >= 0)");
    out.stopTokenIds = ids as number[];
  }
  if (!absent(body.logit_bias)) {
    const lb = body.logit_bias;
    if (typeof lb !== "object" || lb === null || Array.isArray(lb)) bad("logit_bias", "must be an object mapping token ids to biases");
    const entries = Object.entries(lb as Record<string, unknown>);
    if (entries.length > 4096) bad("logit_bias", `must have at most 4096 entries, got ${entries.length}`);
    for (const [k, v] of entries) {
      if (!/^\d{1,9}$/.test(k)) bad(`logit_bias.${k}`, "keys must be token ids (strings of digits)");
      if (typeof v !== "number" || !Number.isFinite(v)) bad(`logit_bias.${k}`, `must be a number, got ${JSON.stringify(v)}`);
    }
    if (entries.length > 0) out.logitBias = Object.fromEntries(entries) as Record<string, number>;
  }
  if (!absent(body.repetition_penalty)) {
    const r = body.repetition_penalty;
    if (!(typeof r === "number" && r > 0 && Number.isFinite(r))) bad("repetition_penalty", `must be a number greater than zero, got ${JSON.stringify(r)}`);
    if (r !== 1) out.repetitionPenalty = r as number;
  }
  if (!absent(body.min_tokens)) {
    const m = body.min_tokens;
    if (!(Number.isInteger(m) && (m as number) >= 0)) bad("min_tokens", `must be an integer >= 0, got ${JSON.stringify(m)}`);
    if (maxTokens !== undefined && (m as number) > maxTokens) bad("min_tokens", `must be less than or equal to ${maxField}=${maxTokens}, got ${m}`);
    if ((m as number) > 0) out.minTokens = m as number;
  }
  if (!absent(body.ignore_eos)) {
    if (typeof body.ignore_eos !== "boolean") bad("ignore_eos", `must be a boolean, got ${JSON.stringify(body.ignore_eos)}`);
    if (body.ignore_eos) out.ignoreEos = true;
  }
  out.logprobs = clientWantsLogprobs;
  if (endpoint === "chat") {
    onlyDefault("top_logprobs", (v) => v === 0, "alternatives are not available on the token path (engines report the sampled token's logprob only); send 0 or leave it out");
  } else {
    onlyDefault("logprobs", (v) => v === 0 || v === false, "alternatives are not available on the token path (engines report the sampled token's logprob only); send 0 for the sampled token's logprob");
  }
  return out;
}
