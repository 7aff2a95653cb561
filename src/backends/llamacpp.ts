// Adapter for llama.cpp's llama-server: token-level calls on POST /completion (token-id prompt,
// n_probs, return_tokens, only Arbor's samplers, one slot per program with cache_prompt; positions
// the server leaves without probabilities are scored again, see llamacpp-rescore.ts), pause/restore
// through the slot save/restore/erase API, load from /metrics (llamacpp:*) and capacity from /props.
// Checked against a real llama-server: llamacpp-live.test.ts, fixtures/README.md.
import { createHash } from "node:crypto";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import {
  BackendHttpError,
  BackendProtocolError,
  type BackendMetrics,
  type GenerateRequest,
  type GenerateResult,
  type TokenBackend,
  type TokenizeRequest,
  type TokenizeResult,
} from "./backend.js";
import { createBuiltinBackend } from "./builtin.js";
import { createEngineHttp, splitBaseUrl } from "./engine-http.js";
import { placeEntries, rescoreLogprobs } from "./llamacpp-rescore.js";
import { LlamaSlotTable } from "./llamacpp-slots.js";
import { openAiMessage } from "./openai-message.js";
import { firstPresent, meanOf, parsePrometheusText } from "./prometheus-text.js";
import { applyStopTokens, checkGenerateRequest, checkTokens, isTokenIds } from "./token-result.js";

/** A llama.cpp PEG parser arena (common_peg_arena JSON) whose root, epsilon, matches without consuming. */
export const ACCEPT_ANY_PARSER = JSON.stringify({ parsers: [{ type: "epsilon" }], rules: {}, root: 0 });

export interface LlamacppBackendOptions {
  name: string;
  /** Server root or its /v1 base, e.g. http://127.0.0.1:8080. */
  url: string;
  clock?: Clock;
  probeTimeoutMs?: number;
  /** Limit for a slot's save, erase or restore (default DEFAULT_ADMIN_TIMEOUT_MS, 60 s). */
  adminTimeoutMs?: number;
}

/** Create a {@link TokenBackend} for a llama-server (slot save/restore needs it started with --slot-save-path). */
export function createLlamacppBackend(opts: LlamacppBackendOptions): TokenBackend {
  const { root, v1 } = splitBaseUrl(opts.name, opts.url);
  const base = createBuiltinBackend({ name: opts.name, url: v1, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs });
  const { name, url } = base;
  const http = createEngineHttp({ name, url, root, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs, adminTimeoutMs: opts.adminTimeoutMs });
  let props: { slots: number; slotCtx: number } | undefined;
  let table: LlamaSlotTable | undefined;
  const saved = new Map<string, string>();

  async function serverProps(): Promise<{ slots: number; slotCtx: number }> {
    if (props) return props;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const p: any = await http.getJson("/props");
    const slots = p?.total_slots;
    const slotCtx = p?.default_generation_settings?.n_ctx;
    if (!(Number.isInteger(slots) && slots >= 1 && Number.isInteger(slotCtx) && slotCtx >= 1)) {
      throw new BackendProtocolError(name, url, "answered GET /props without total_slots and default_generation_settings.n_ctx");
    }
    props = { slots, slotCtx };
    return props;
  }

  async function slots(): Promise<LlamaSlotTable> {
    table ??= new LlamaSlotTable((await serverProps()).slots);
    return table;
  }

  async function generate(req: GenerateRequest): Promise<GenerateResult> {
    checkGenerateRequest(name, url, req);
    const body: Record<string, unknown> = {
      prompt: req.promptTokenIds,
      n_predict: req.maxTokens,
      temperature: req.temperature,
      // One alternative: each entry then carries the sampled token's own probability.
      n_probs: 1,
      // Only Arbor's policy: softmax(logits / T) within the top-p nucleus. llama-server's default
      // chain also applies penalties, top-k 40, min-p 0.05, typical-p and XTC; T = 0 is greedy.
      samplers: ["temperature", "top_p"],
      cache_prompt: true,
      return_tokens: true,
      stream: false,
      // llama-server (since its PEG chat parsers) parses every answer's text as a chat message and
      // answers 500 when the text is not valid UTF-8, which a policy sampling byte tokens produces.
      // Token-level calls never use that message: a parser that accepts the empty prefix skips it.
      chat_parser: ACCEPT_ANY_PARSER,
      // -1 lets the server pick an idle slot.
      id_slot: req.programId !== undefined ? (await slots()).slotFor(req.programId) : -1,
    };
    // The server's default top_p is 0.95, not 1.
    body.top_p = req.topP ?? 1;
    // Sampled: report each token's probability under the distribution it was drawn from (after
    // temperature and top-p, renormalised). Greedy: the raw softmax, which is what T = 0 reports elsewhere.
    const postSampling = req.temperature > 0;
    if (postSampling) body.post_sampling_probs = true;
    if (req.seed !== undefined) body.seed = req.seed;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json: any = await http.postJson("/completion", body, req.signal);
    const ids: unknown = json?.tokens;
    if (!isTokenIds(ids)) throw new BackendProtocolError(name, url, "returned no tokens (return_tokens ignored?)");
    let lps = alignedLogprobs(json, ids, postSampling);
    if (lps === undefined) {
      // Some tokens came back without probabilities (an incomplete UTF-8 tail): score those again,
      // or all of them when it is not certain which entry belongs to which token.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const entries: any[] = json.completion_probabilities;
      const placed = placeEntries(entries.map((e) => e?.id), ids);
      const have = new Map<number, number>();
      placed?.forEach((pos, j) => have.set(pos, entryLogprob(entries[j], j, postSampling)));
      const positions = ids.map((_, i) => i).filter((i) => !have.has(i));
      const idSlot = typeof json.id_slot === "number" && json.id_slot >= 0 ? json.id_slot : (body.id_slot as number);
      const scored = await rescoreLogprobs(
        {
          complete: (b, signal) => http.postJson("/completion", b, signal),
          eosId,
          extra: { chat_parser: ACCEPT_ANY_PARSER },
          protocolError: (problem) => new BackendProtocolError(name, url, problem),
        },
        { prompt: req.promptTokenIds, output: ids, positions, temperature: req.temperature, topP: req.topP ?? 1, idSlot, signal: req.signal },
      );
      positions.forEach((pos, k) => have.set(pos, scored[k] as number));
      lps = ids.map((_, i) => have.get(i) as number);
    }
    checkTokens(name, url, ids, lps, "tokens vs completion_probabilities");
    const r: GenerateResult = { outputTokenIds: ids, logprobs: lps, finishReason: finishReason(json), policyVersion: null, promptTokenIds: req.promptTokenIds };
    return applyStopTokens(r, req.stopTokenIds);
  }

  /** One logprob per token when completion_probabilities line up with the tokens; undefined when some are missing. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function alignedLogprobs(json: any, ids: number[], postSampling: boolean): number[] | undefined {
    const probs = json.completion_probabilities;
    if (probs === undefined && ids.length === 0) return [];
    if (!Array.isArray(probs)) throw new BackendProtocolError(name, url, "returned no completion_probabilities (n_probs ignored?)");
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    if (probs.length !== ids.length || probs.some((p: any, i: number) => p?.id !== ids[i])) {
      if (probs.length < ids.length) return undefined;
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const off = probs.findIndex((p: any, i: number) => p?.id !== ids[i]);
      throw new BackendProtocolError(name, url, `returned completion_probabilities[${off}].id ${String(probs[off]?.id)} for token ${String(ids[off])}`);
    }
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return probs.map((p: any, i: number) => entryLogprob(p, i, postSampling));
  }

  /** With post_sampling_probs the server reports `prob` (a float32 probability), else `logprob`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function entryLogprob(p: any, i: number, postSampling: boolean): number {
    return postSampling ? logOfProb(p?.prob, i) : p?.logprob;
  }

  let eos: number | undefined;
  async function eosId(): Promise<number> {
    if (eos !== undefined) return eos;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const p: any = await http.getJson("/props");
    if (typeof p?.eos_token !== "string") throw new BackendProtocolError(name, url, "answered GET /props without eos_token");
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const t: any = await http.postJson("/tokenize", { content: p.eos_token, add_special: false, parse_special: true });
    if (!(isTokenIds(t?.tokens) && t.tokens.length === 1)) throw new BackendProtocolError(name, url, `tokenized eos_token ${JSON.stringify(p.eos_token)} to ${JSON.stringify(t?.tokens)}, not one token`);
    eos = t.tokens[0] as number;
    return eos;
  }

  function logOfProb(prob: unknown, i: number): number {
    // A sampled token always has a probability > 0 under the distribution it was drawn from.
    if (typeof prob !== "number" || !(prob > 0 && prob <= 1)) {
      throw new BackendProtocolError(name, url, `returned completion_probabilities[${i}].prob ${JSON.stringify(prob ?? null)} (expected a probability in (0, 1])`);
    }
    return Math.log(prob);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function finishReason(json: any): GenerateResult["finishReason"] {
    const t = json.stop_type;
    if (json.truncated === true || t === "limit") return "length";
    if (t === "eos" || t === "word") return "stop";
    // "none" in a final answer: the generation was cut off (the client went away, the server shut down).
    if (t === "none") return "abort";
    throw new BackendProtocolError(name, url, `returned stop_type ${JSON.stringify(t ?? null)} (expected eos, word, limit or none)`);
  }

  // Chat: llama-server renders the model's template with /apply-template and tokenizes the text as its own
  // chat route does: special tokens parsed, and with add_special, because the rendering drops a leading BOS
  // the model adds itself (common/chat.cpp strips it so that the tokenizer adds it once). Plain text: parsed
  // as /completion parses a text prompt.
  async function tokenize(req: TokenizeRequest): Promise<TokenizeResult> {
    let content: string;
    let addSpecial: boolean;
    let parseSpecial = true;
    if ("messages" in req) {
      if (req.continueFinalMessage === true) {
        // /apply-template has no continue_final_message (its assistant prefill differs across
        // llama-server versions): refused, naming the client's field, rather than closed as a turn.
        const message = "continuing the final assistant message is not supported by llama-server's /apply-template";
        throw new BackendHttpError(name, url, 400, message, { error: { message, type: "invalid_request_error", param: "continue_final_message", code: null } });
      }
      // OpenAI's shape: the template renders earlier tool calls, tool results and reasoning.
      const messages = req.messages.map(openAiMessage);
      const body = { messages, add_generation_prompt: req.addGenerationPrompt, ...(req.tools?.length ? { tools: req.tools } : {}) };
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const t: any = await http.postJson("/apply-template", body, req.signal);
      if (typeof t?.prompt !== "string") throw new BackendProtocolError(name, url, "answered /apply-template without prompt (the rendered text)");
      content = t.prompt;
      addSpecial = true;
    } else {
      content = req.text;
      addSpecial = req.addSpecialTokens;
      parseSpecial = req.parseSpecial === true;
    }
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json: any = await http.postJson("/tokenize", { content, add_special: addSpecial, parse_special: parseSpecial }, req.signal);
    if (!isTokenIds(json?.tokens)) throw new BackendProtocolError(name, url, "answered /tokenize without tokens (a list of token ids)");
    return { tokens: json.tokens, maxModelLen: (await serverProps()).slotCtx };
  }

  async function detokenize(tokenIds: number[], signal?: AbortSignal): Promise<string> {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json: any = await http.postJson("/detokenize", { tokens: tokenIds }, signal);
    if (typeof json?.content !== "string") throw new BackendProtocolError(name, url, "answered /detokenize without content (the text)");
    return json.content;
  }

  async function scrapeMetrics(): Promise<BackendMetrics> {
    const samples = parsePrometheusText(await http.getText("/metrics"));
    const p = await serverProps();
    const fresh = firstPresent(samples, ["llamacpp:prompt_tokens_total"]);
    const cached = firstPresent(samples, ["llamacpp:prompt_tokens_cached_total"]);
    return {
      running: firstPresent(samples, ["llamacpp:requests_processing"]),
      waiting: firstPresent(samples, ["llamacpp:requests_deferred"]),
      // Exported by older builds only (removed upstream); null on current ones.
      kvUsage: firstPresent(samples, ["llamacpp:kv_cache_usage_ratio"], meanOf),
      // Slots x per-slot context: Arbor starts llama-server with an explicit --parallel, which keeps
      // one KV region per slot (with --kv-unified the slots share one and this overcounts).
      kvCapacityTokens: p.slots * p.slotCtx,
      // prompt_tokens_total counts the prompt tokens computed (cache misses), prompt_tokens_cached_total
      // those re-used from a slot's cache; builds before the latter existed report null.
      prefixCacheQueries: fresh !== null && cached !== null ? fresh + cached : null,
      prefixCacheHits: fresh !== null && cached !== null ? cached : null,
      prefixCacheHitRate: null,
    };
  }

  // llama-server only accepts plain file names (no separators): hash the program id.
  const fileFor = (programId: string) => `arbor-${createHash("sha256").update(programId).digest("hex").slice(0, 24)}.bin`;

  async function pause(programId: string): Promise<void> {
    const t = await slots();
    const slot = t.get(programId);
    if (slot === undefined) throw new ArborError(`backend '${name}' at ${url}: program '${programId}' holds no slot to pause`, "backend_state");
    const filename = fileFor(programId);
    await http.postAdmin(`/slots/${slot}?action=save`, { filename });
    await http.postAdmin(`/slots/${slot}?action=erase`, {});
    t.release(programId);
    saved.set(programId, filename);
  }

  async function restore(programId: string): Promise<void> {
    const filename = saved.get(programId);
    if (filename === undefined) throw new ArborError(`backend '${name}' at ${url}: program '${programId}' is not paused here`, "backend_state");
    const slot = (await slots()).slotFor(programId);
    await http.postAdmin(`/slots/${slot}?action=restore`, { filename });
    saved.delete(programId);
  }

  return {
    ...base,
    type: "llamacpp",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: true },
    generate,
    tokenize,
    detokenize,
    scrapeMetrics,
    pause,
    restore,
  };
}
