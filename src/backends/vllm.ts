// Adapters for engines that speak vLLM's OpenAI protocol with token ids: vLLM itself and Arbor's
// built-in engine (which adds policy_version). Token-level calls use /v1/completions with a token-id
// prompt, return_token_ids and logprobs; load comes from /metrics under vLLM's names.
// vLLM reports logprobs of the raw model distribution (its default --logprobs-mode raw_logprobs:
// before temperature and top-p); start it with --logprobs-mode processed_logprobs for the sampling one.
import type { Clock } from "../core/clock.js";
import {
  BackendHttpError,
  BackendProtocolError,
  type BackendMetrics,
  type GenerateRequest,
  type GenerateResult,
  type GenerateStream,
  type TokenBackend,
  type TokenizeRequest,
  type TokenizeResult,
} from "./backend.js";
import { toolParserNamed } from "./answer-parsers.js";
import { createBuiltinBackend } from "./builtin.js";
import { createEngineHttp, describeNetworkError, errorDetail, splitBaseUrl } from "./engine-http.js";
import { openAiMessage } from "./openai-message.js";
import { firstPresent, meanOf, parsePrometheusText, type PromSample } from "./prometheus-text.js";
import { postSse } from "./sse.js";
import { completionTokenStream } from "./vllm-stream.js";
import { applyStopTokens, checkGenerateRequest, checkTokens, isPolicyVersions, isTokenIds, vllmSamplingFields } from "./token-result.js";

export interface VllmBackendOptions {
  name: string;
  /** Server root or its /v1 base, e.g. http://127.0.0.1:8000/v1. */
  url: string;
  /** The model name the engine serves: sent with every call, whatever the client named (omitted = vLLM's default for token calls, the client's name otherwise). */
  model?: string;
  clock?: Clock;
  probeTimeoutMs?: number;
  /** Limit for a program's pause or restore (default DEFAULT_ADMIN_TIMEOUT_MS, 60 s). */
  adminTimeoutMs?: number;
}

/** Create a {@link TokenBackend} for a vLLM server (>= 0.10.2 for return_token_ids); policyVersion is null. */
export function createVllmBackend(opts: VllmBackendOptions): TokenBackend {
  return createVllmProtocolBackend(opts, "vllm");
}

/**
 * Create a {@link TokenBackend} for Arbor's built-in engine: vLLM's protocol plus policy_version and
 * program pause/restore. Its answers are read with Arbor's tool-call markup unless the served
 * model's parser is given (createBackend sets it from the config).
 */
export function createArborBackend(opts: VllmBackendOptions): TokenBackend {
  return { ...createVllmProtocolBackend(opts, "builtin"), toolParser: toolParserNamed("arbor", `backend '${opts.name}' toolParser`) };
}

function createVllmProtocolBackend(opts: VllmBackendOptions, type: "vllm" | "builtin"): TokenBackend {
  const { root, v1 } = splitBaseUrl(opts.name, opts.url);
  const base = createBuiltinBackend({ name: opts.name, url: v1, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs, ...(opts.model !== undefined ? { model: opts.model } : { discoverModel: true }) });
  const { name, url } = base;
  const http = createEngineHttp({ name, url, root, clock: opts.clock, probeTimeoutMs: opts.probeTimeoutMs, adminTimeoutMs: opts.adminTimeoutMs });
  const arbor = type === "builtin";

  /** The /v1/completions body but its prompt (which every body sends first). */
  function completionFields(req: GenerateRequest, stream: boolean): Record<string, unknown> {
    checkGenerateRequest(name, url, req);
    const body: Record<string, unknown> = {
      max_tokens: req.maxTokens,
      temperature: req.temperature,
      // 0 alternatives: only the sampled token's logprob (vLLM and Arbor alike).
      logprobs: 0,
      return_token_ids: true,
      stream,
    };
    if (opts.model !== undefined) body.model = opts.model;
    if (req.topP !== undefined) body.top_p = req.topP;
    if (req.seed !== undefined) body.seed = req.seed;
    if (req.stopTokenIds?.length) body.stop_token_ids = req.stopTokenIds;
    Object.assign(body, vllmSamplingFields(req));
    if (arbor && req.programId !== undefined) body.program_id = req.programId;
    if (arbor && req.kvTransferParams !== undefined) body.kv_transfer_params = req.kvTransferParams;
    if (arbor && req.draftGroupId !== undefined) body.draft_group_id = req.draftGroupId;
    return body;
  }

  async function generate(req: GenerateRequest): Promise<GenerateResult> {
    // The answer echoes the prompt's ids (return_token_ids): read from the request where they came back as sent.
    const json = await http.postEchoingPrompt("/v1/completions", req.promptTokenIds, completionFields(req, false), req.signal);
    return applyStopTokens(parseCompletion(json), req.stopTokenIds);
  }

  // The same request streamed: vLLM and Arbor's engine send the ids and logprobs chunk by chunk.
  async function generateStream(req: GenerateRequest): Promise<GenerateStream> {
    const body = { prompt: req.promptTokenIds, ...completionFields(req, true) };
    const reply = await postSse({ name, url, describeError: describeNetworkError }, `${url}/completions`, body, req.signal);
    if (!reply.ok) {
      throw new BackendHttpError(name, url, reply.status, `POST /v1/completions: ${errorDetail(JSON.stringify(reply.json))}`, reply.json);
    }
    return completionTokenStream(reply.events, { name, url, policyVersion: arbor, ...(req.stopTokenIds ? { stopTokenIds: req.stopTokenIds } : {}) });
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function parseCompletion(json: any): GenerateResult {
    const choice = Array.isArray(json?.choices) ? json.choices[0] : undefined;
    if (typeof choice !== "object" || choice === null) throw new BackendProtocolError(name, url, "returned no choices[0] from /v1/completions");
    const lp = choice.logprobs?.token_logprobs;
    if (!Array.isArray(lp)) throw new BackendProtocolError(name, url, "returned no choices[0].logprobs.token_logprobs");
    const ids: unknown = choice.token_ids;
    if (!isTokenIds(ids)) {
      throw new BackendProtocolError(name, url, "returned no choices[0].token_ids; token-level calls need return_token_ids (vLLM >= 0.10.2 or the built-in engine)");
    }
    checkTokens(name, url, ids, lp, "choices[0].token_ids vs logprobs.token_logprobs");
    const prompt: unknown = choice.prompt_token_ids ?? json.prompt_token_ids;
    if (!isTokenIds(prompt)) throw new BackendProtocolError(name, url, "returned no choices[0].prompt_token_ids");
    let policyVersion: number | null = null;
    if (arbor) {
      if (!(Number.isInteger(json.policy_version) && json.policy_version >= 0)) {
        throw new BackendProtocolError(name, url, "returned no policy_version (an integer >= 0)");
      }
      policyVersion = json.policy_version;
    }
    const result: GenerateResult = { outputTokenIds: ids, logprobs: lp as number[], finishReason: finishReason(choice.finish_reason), policyVersion, promptTokenIds: prompt };
    const kv: unknown = json.kv_transfer_params;
    if (arbor && typeof kv === "object" && kv !== null && !Array.isArray(kv)) result.kvTransferParams = kv as Record<string, unknown>;
    // Arbor's engine says which weights made each token (they differ after an in_flight resume); vLLM sends none.
    const versions: unknown = choice.token_policy_versions;
    if (arbor && versions !== undefined && versions !== null) {
      if (!isPolicyVersions(versions) || versions.length !== ids.length) {
        throw new BackendProtocolError(name, url, `returned choices[0].token_policy_versions that is not one integer >= 0 per output token (${ids.length})`);
      }
      // Kept only where they say more than policyVersion (absent = all tokens at it).
      if (versions.some((v) => v !== policyVersion)) result.tokenPolicyVersions = versions;
    }
    return result;
  }

  function finishReason(raw: unknown): GenerateResult["finishReason"] {
    if (raw === "stop" || raw === "length" || raw === "abort") return raw;
    // vLLM (v1/engine FINISH_REASON_STRINGS) also ends a request early on a detected repetition
    // (only when the request asks for repetition_detection): the output ended by a rule, not the budget.
    if (raw === "repetition") return "stop";
    throw new BackendProtocolError(name, url, `returned finish_reason ${JSON.stringify(raw)} (expected stop, length or abort)`);
  }

  // vLLM's /tokenize renders chat messages with the served model's own chat template; the template
  // already starts with BOS, so add_special_tokens stays false for chat and true for plain text.
  // Messages go in OpenAI's shape (tool_calls, tool_call_id) as templates render them; tool_choice
  // is an Arbor extension (a forced call's opening), sent to Arbor's engine only; the gateway appends
  // a forced call's opening itself (a text tokenized with parseSpecial), the same for every engine.
  async function tokenize(req: TokenizeRequest): Promise<TokenizeResult> {
    const body: Record<string, unknown> =
      "messages" in req
        ? {
            messages: req.messages.map(openAiMessage),
            add_generation_prompt: req.addGenerationPrompt,
            ...(req.continueFinalMessage === true ? { continue_final_message: true } : {}),
            add_special_tokens: false,
            ...(req.tools?.length ? { tools: req.tools } : {}),
            ...(arbor && req.tools?.length && req.toolChoice != null ? { tool_choice: req.toolChoice } : {}),
          }
        : // Hugging Face tokenizers read special tokens' text as their ids; Arbor's engine does when asked.
          { prompt: req.text, add_special_tokens: req.addSpecialTokens, ...(arbor && req.parseSpecial === true ? { parse_special: true } : {}) };
    if (opts.model !== undefined) body.model = opts.model;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json: any = await http.postJson("/tokenize", body, req.signal);
    if (!isTokenIds(json?.tokens)) throw new BackendProtocolError(name, url, "answered /tokenize without tokens (a list of token ids)");
    const len = json.max_model_len;
    return { tokens: json.tokens, maxModelLen: Number.isInteger(len) && len > 0 ? len : null };
  }

  async function detokenize(tokenIds: number[], signal?: AbortSignal): Promise<string> {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json: any = await http.postJson("/detokenize", { tokens: tokenIds, ...(opts.model !== undefined ? { model: opts.model } : {}) }, signal);
    if (typeof json?.prompt !== "string") throw new BackendProtocolError(name, url, "answered /detokenize without prompt (the text)");
    return json.prompt;
  }

  async function scrapeMetrics(): Promise<BackendMetrics> {
    return vllmMetrics(parsePrometheusText(await http.getText("/metrics")));
  }

  const programCall = async (programId: string, action: "pause" | "restore", body: object): Promise<{ kvTokens: number }> => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const json: any = await http.postAdmin(`/v1/programs/${encodeURIComponent(programId)}/${action}`, body);
    return { kvTokens: Number.isInteger(json?.kv_tokens) ? json.kv_tokens : 0 };
  };

  return {
    ...base,
    type,
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: arbor },
    // vLLM's own fields, and the built-in engine honours them with vLLM's semantics (engine/sampling.ts).
    samplingControls: ["logitBias", "repetitionPenalty", "minTokens", "ignoreEos"],
    generate,
    generateStream,
    tokenize,
    detokenize,
    scrapeMetrics,
    ...(arbor
      ? {
          // L2 (host memory) keeps the KV restorable fastest; the engine spills to L3 itself when L2 is full.
          pause: async (programId: string) => void (await programCall(programId, "pause", { to: "L2" })),
          restore: (programId: string) => programCall(programId, "restore", {}),
          // Moving an already paused program from L2 to L3 (kv/pooled-state-tier.ts with a kvPool).
          shareProgram: async (programId: string) => void (await programCall(programId, "pause", { to: "L3" })),
        }
      : {}),
  };
}

/** Read vLLM-named metrics (v1 names first, the older gpu_* names as fallback). */
export function vllmMetrics(samples: readonly PromSample[]): BackendMetrics {
  const info = samples.find((s) => s.name === "vllm:cache_config_info");
  const blockSize = Number(info?.labels.block_size);
  const blocks = Number(info?.labels.num_gpu_blocks);
  return {
    running: firstPresent(samples, ["vllm:num_requests_running"]),
    waiting: firstPresent(samples, ["vllm:num_requests_waiting"]),
    kvUsage: firstPresent(samples, ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"], meanOf),
    kvCapacityTokens: Number.isInteger(blockSize) && Number.isInteger(blocks) && blockSize > 0 && blocks >= 0 ? blockSize * blocks : null,
    prefixCacheQueries: firstPresent(samples, ["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"]),
    prefixCacheHits: firstPresent(samples, ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"]),
    prefixCacheHitRate: null,
  };
}
