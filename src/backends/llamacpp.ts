// Adapter for llama.cpp's llama-server: token-level calls on POST /completion (token-id prompt,
// n_probs, return_tokens, one slot per program with cache_prompt), pause/restore through the
// slot save/restore/erase API, load from /metrics (llamacpp:*) and capacity from /props.
import { createHash } from "node:crypto";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { BackendProtocolError, type BackendMetrics, type GenerateRequest, type GenerateResult, type TokenBackend } from "./backend.js";
import { createBuiltinBackend } from "./builtin.js";
import { createEngineHttp, splitBaseUrl } from "./engine-http.js";
import { LlamaSlotTable } from "./llamacpp-slots.js";
import { firstPresent, meanOf, parsePrometheusText } from "./prometheus-text.js";
import { applyStopTokens, checkGenerateRequest, checkTokens } from "./token-result.js";

export interface LlamacppBackendOptions {
  name: string;
  /** Server root or its /v1 base, e.g. http://127.0.0.1:8080. */
  url: string;
  clock?: Clock;
  probeTimeoutMs?: number;
}

/** Create a {@link TokenBackend} for a llama-server (slot save/restore needs it started with --slot-save-path). */
export function createLlamacppBackend(opts: LlamacppBackendOptions): TokenBackend {
  const { root, v1 } = splitBaseUrl(opts.name, opts.url);
  const base = createBuiltinBackend({ name: opts.name, url: v1, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs });
  const { name, url } = base;
  const http = createEngineHttp({ name, url, root, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs });
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
      // One alternative: each entry then carries the sampled token's own logprob.
      n_probs: 1,
      cache_prompt: true,
      return_tokens: true,
      stream: false,
      // -1 lets the server pick an idle slot.
      id_slot: req.programId !== undefined ? (await slots()).slotFor(req.programId) : -1,
    };
    if (req.topP !== undefined) body.top_p = req.topP;
    if (req.seed !== undefined) body.seed = req.seed;
    const json = await http.postJson("/completion", body, req.signal);
    return applyStopTokens(parseCompletion(json, req.promptTokenIds), req.stopTokenIds);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function parseCompletion(json: any, prompt: number[]): GenerateResult {
    const probs = json?.completion_probabilities;
    if (!Array.isArray(probs)) throw new BackendProtocolError(name, url, "returned no completion_probabilities (n_probs ignored?)");
    const ids: unknown = json.tokens;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const lps = probs.map((p: any) => p?.logprob);
    checkTokens(name, url, ids, lps, "tokens vs completion_probabilities");
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const off = probs.findIndex((p: any, i: number) => p?.id !== ids[i]);
    if (off >= 0) throw new BackendProtocolError(name, url, `returned completion_probabilities[${off}].id ${String(probs[off]?.id)} for token ${ids[off]}`);
    return { outputTokenIds: ids, logprobs: lps as number[], finishReason: finishReason(json), policyVersion: null, promptTokenIds: prompt };
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

  async function scrapeMetrics(): Promise<BackendMetrics> {
    const samples = parsePrometheusText(await http.getText("/metrics"));
    const p = await serverProps();
    return {
      running: firstPresent(samples, ["llamacpp:requests_processing"]),
      waiting: firstPresent(samples, ["llamacpp:requests_deferred"]),
      kvUsage: firstPresent(samples, ["llamacpp:kv_cache_usage_ratio"], meanOf),
      kvCapacityTokens: p.slots * p.slotCtx,
      prefixCacheQueries: null,
      prefixCacheHits: null,
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
    await http.postJson(`/slots/${slot}?action=save`, { filename });
    await http.postJson(`/slots/${slot}?action=erase`, {});
    t.release(programId);
    saved.set(programId, filename);
  }

  async function restore(programId: string): Promise<void> {
    const filename = saved.get(programId);
    if (filename === undefined) throw new ArborError(`backend '${name}' at ${url}: program '${programId}' is not paused here`, "backend_state");
    const slot = (await slots()).slotFor(programId);
    await http.postJson(`/slots/${slot}?action=restore`, { filename });
    saved.delete(programId);
  }

  return {
    ...base,
    type: "llamacpp",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: true },
    generate,
    scrapeMetrics,
    pause,
    restore,
  };
}
