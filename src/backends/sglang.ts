// Adapter for SGLang: token-level calls on its native POST /generate (input_ids, return_logprob),
// capacity from the sglang:max_total_num_tokens gauge or /get_server_info, load from /metrics (sglang:*).
import type { Clock } from "../core/clock.js";
import { BackendProtocolError, type BackendMetrics, type GenerateRequest, type GenerateResult, type TokenBackend } from "./backend.js";
import { createBuiltinBackend } from "./builtin.js";
import { createEngineHttp, splitBaseUrl } from "./engine-http.js";
import { firstPresent, meanOf, parsePrometheusText, type PromSample } from "./prometheus-text.js";
import { checkGenerateRequest, checkTokens, isTokenIds } from "./token-result.js";

export interface SglangBackendOptions {
  name: string;
  /** Server root or its /v1 base, e.g. http://127.0.0.1:30000. */
  url: string;
  clock?: Clock;
  probeTimeoutMs?: number;
  /** The model name the server serves: OpenAI-route calls are sent with it, whatever the client named. */
  model?: string;
}

/** Create a {@link TokenBackend} for an SGLang server. */
export function createSglangBackend(opts: SglangBackendOptions): TokenBackend {
  const { root, v1 } = splitBaseUrl(opts.name, opts.url);
  const base = createBuiltinBackend({ name: opts.name, url: v1, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs, ...(opts.model !== undefined ? { model: opts.model } : { discoverModel: true }) });
  const { name, url } = base;
  const http = createEngineHttp({ name, url, root, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs });
  // The KV pool size is fixed at server start: read it once.
  let capacity: number | undefined;

  async function generate(req: GenerateRequest): Promise<GenerateResult> {
    checkGenerateRequest(name, url, req);
    const sampling: Record<string, unknown> = { max_new_tokens: req.maxTokens, temperature: req.temperature };
    if (req.topP !== undefined) sampling.top_p = req.topP;
    if (req.stopTokenIds?.length) sampling.stop_token_ids = req.stopTokenIds;
    // SGLang's names for vLLM's controls (same semantics; min_tokens is min_new_tokens).
    if (req.logitBias !== undefined && Object.keys(req.logitBias).length > 0) sampling.logit_bias = req.logitBias;
    if (req.repetitionPenalty !== undefined && req.repetitionPenalty !== 1) sampling.repetition_penalty = req.repetitionPenalty;
    if (req.minTokens) sampling.min_new_tokens = req.minTokens;
    if (req.ignoreEos) sampling.ignore_eos = true;
    // SGLang's per-request seed (honoured by its deterministic sampling path).
    if (req.seed !== undefined) sampling.sampling_seed = req.seed;
    const json = await http.postJson(
      "/generate",
      // -1: logprobs of the output tokens only, no prompt logprobs to compute.
      { input_ids: req.promptTokenIds, sampling_params: sampling, return_logprob: true, logprob_start_len: -1, stream: false },
      req.signal,
    );
    return parseGenerate(json, req.promptTokenIds);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function parseGenerate(json: any, prompt: number[]): GenerateResult {
    const meta = json?.meta_info;
    if (typeof meta !== "object" || meta === null) throw new BackendProtocolError(name, url, "returned no meta_info from /generate");
    const triples = meta.output_token_logprobs;
    if (!Array.isArray(triples)) throw new BackendProtocolError(name, url, "returned no meta_info.output_token_logprobs (return_logprob ignored?)");
    // Each entry is [logprob, token_id, token_text_or_null].
    const ids = triples.map((t: unknown) => (Array.isArray(t) ? t[1] : undefined));
    const lps = triples.map((t: unknown) => (Array.isArray(t) ? t[0] : undefined));
    checkTokens(name, url, ids, lps, "meta_info.output_token_logprobs");
    if (json.output_ids !== undefined && !(isTokenIds(json.output_ids) && sameIds(json.output_ids, ids))) {
      throw new BackendProtocolError(name, url, "returned output_ids that differ from meta_info.output_token_logprobs");
    }
    const type = meta.finish_reason?.type;
    if (type !== "stop" && type !== "length" && type !== "abort") {
      throw new BackendProtocolError(name, url, `returned meta_info.finish_reason ${JSON.stringify(meta.finish_reason ?? null)} (expected type stop, length or abort)`);
    }
    return { outputTokenIds: ids, logprobs: lps as number[], finishReason: type, policyVersion: weightVersion(meta.weight_version), promptTokenIds: prompt };
  }

  async function kvCapacity(): Promise<number | null> {
    if (capacity !== undefined) return capacity;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const info: any = await http.getJson("/get_server_info");
    const v = info?.max_total_num_tokens ?? info?.internal_states?.[0]?.max_total_num_tokens;
    if (!(Number.isInteger(v) && v > 0)) return null;
    capacity = v as number;
    return capacity;
  }

  async function scrapeMetrics(): Promise<BackendMetrics> {
    const samples = parsePrometheusText(await http.getText("/metrics"));
    const queries = firstPresent(samples, ["sglang:prompt_tokens_total"]);
    const hits = firstPresent(samples, ["sglang:cached_tokens_total"]);
    return {
      running: firstPresent(samples, ["sglang:num_running_reqs"]),
      waiting: firstPresent(samples, ["sglang:num_queue_reqs"]),
      kvUsage: firstPresent(samples, ["sglang:token_usage"], meanOf),
      kvCapacityTokens: poolTokens(samples) ?? (await kvCapacity()),
      // Counters only when both exist: a hit count without its query count says nothing.
      prefixCacheQueries: queries !== null && hits !== null ? queries : null,
      prefixCacheHits: queries !== null && hits !== null ? hits : null,
      prefixCacheHitRate: firstPresent(samples, ["sglang:cache_hit_rate"], meanOf),
    };
  }

  return {
    ...base,
    type: "sglang",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
    samplingControls: ["logitBias", "repetitionPenalty", "minTokens", "ignoreEos"],
    generate,
    scrapeMetrics,
  };
}

/**
 * The KV pool size from the scheduler's sglang:max_total_num_tokens gauge (newer SGLang), one pool
 * per data-parallel rank: tensor/pipeline ranks of one DP rank report the same pool, so only their
 * rank-0 samples count. Null when absent or still 0 (the gauge is first set at the first stats log).
 */
function poolTokens(samples: readonly PromSample[]): number | null {
  const xs = samples.filter(
    (s) => s.name === "sglang:max_total_num_tokens" && (s.labels.tp_rank ?? "0") === "0" && (s.labels.pp_rank ?? "0") === "0" && Number.isFinite(s.value) && s.value > 0,
  );
  return xs.length ? xs.reduce((a, s) => a + s.value, 0) : null;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * The policy version in SGLang's `meta_info.weight_version` (the server's weight version when the output was
 * produced): Arbor's weight sync sets it to the version's number (`weight_version` of /update_weights_from_disk);
 * anything else (the server's default "default", a name of its own) is no version.
 */
function weightVersion(v: unknown): number | null {
  return typeof v === "string" && /^\d{1,9}$/.test(v) ? Number(v) : null;
}
