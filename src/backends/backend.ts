// The Backend interface: how the gateway speaks to one inference engine over HTTP. Adapters only
// translate transport; routing, pausing and tracing live in the gateway.
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import type { ReasoningParser } from "../model/reasoning/reasoning-parser.js";
import type { ToolCallParser } from "../model/tool-parsers/tool-parser.js";

/** An upstream answer as received: the HTTP status and the parsed JSON body (errors included). */
export interface BackendReply {
  status: number;
  // The shape depends on the endpoint and the engine; the gateway validates what it uses.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export interface Backend {
  readonly name: string;
  /** Base URL of the OpenAI-compatible API, ending in /v1 (no trailing slash). */
  readonly url: string;
  /** The model name the engine serves and every call is sent with (absent: the client's name goes through). */
  readonly servedModel?: string;
  /**
   * POST {url}/chat/completions. Upstream errors (4xx/5xx with a JSON body) are returned, not thrown.
   * Throws {@link BackendUnreachableError} when the engine cannot be reached, `signal.reason` when aborted.
   */
  chatCompletions(body: object, signal?: AbortSignal): Promise<BackendReply>;
  /** POST {url}/completions, with the same error contract as {@link Backend.chatCompletions}. */
  completions(body: object, signal?: AbortSignal): Promise<BackendReply>;
  /** GET {url}/models: the engine's model list. Throws an ArborError when unreachable or not 200. */
  models(): Promise<unknown>;
  /** Resolves when the engine answers; throws an ArborError naming the backend, url and cause. */
  health(): Promise<void>;
}

/** The engine could not be reached (connection refused, DNS failure, reset...). */
export class BackendUnreachableError extends ArborError {
  constructor(
    readonly backend: string,
    readonly url: string,
    cause: string,
  ) {
    super(`backend '${backend}' at ${url} is not reachable: ${cause}`, "backend_unreachable");
  }
}

/** The engine answered, but not in a shape Arbor can use (non-JSON, missing token ids...). */
export class BackendProtocolError extends ArborError {
  constructor(
    readonly backend: string,
    readonly url: string,
    problem: string,
  ) {
    super(`backend '${backend}' at ${url} ${problem}`, "backend_protocol");
  }
}

/** A token-level generation request: the gateway sends each program's token history as the prompt. */
export interface GenerateRequest {
  promptTokenIds: number[];
  maxTokens: number;
  temperature: number;
  topP?: number;
  seed?: number;
  /** Generation ends after any of these tokens (the token is kept in the output, as vLLM does). */
  stopTokenIds?: number[];
  /** vLLM's logit_bias: token id (as a string) → bias added to its logit. Only to backends listing "logitBias". */
  logitBias?: Record<string, number>;
  /** vLLM's repetition_penalty (> 0, 1 = off), over prompt and output tokens. Only to backends listing it. */
  repetitionPenalty?: number;
  /** vLLM's min_tokens: no stop (EOS or stopTokenIds) before this many output tokens. Only to backends listing it. */
  minTokens?: number;
  /** vLLM's ignore_eos: do not stop on the model's EOS. Only to backends listing it. */
  ignoreEos?: boolean;
  /** The agent program the call belongs to (program-aware engines keep its KV; llama-server picks its slot). */
  programId?: string;
  /** Prefill/decode handoff (Arbor's engine, vLLM's field): sent as `kv_transfer_params` (backends/disagg-backend.ts). */
  kvTransferParams?: Record<string, unknown>;
  /** The program's GRPO group: Arbor's engine drafts from its siblings' responses (`draft_group_id`, speculative decoding). */
  draftGroupId?: string;
  signal?: AbortSignal;
}

export interface GenerateResult {
  outputTokenIds: number[];
  /** One logprob per output token, under the sampling policy. */
  logprobs: number[];
  finishReason: "stop" | "length" | "abort";
  /** The weights version that produced the tokens; null for engines that do not report one. */
  policyVersion: number | null;
  /** The prompt as the engine saw it (echoed by the engine where it does, else as sent). */
  promptTokenIds: number[];
  /**
   * The weights version of each output token, where the engine reports them (Arbor's
   * `token_policy_versions`); null entries: no version known. Absent = all at policyVersion.
   */
  tokenPolicyVersions?: (number | null)[];
  /** The engine's `kv_transfer_params` answer to a prefill/decode handoff (Arbor's engine). */
  kvTransferParams?: Record<string, unknown>;
}

/** Output tokens as they arrive from a streamed generation (aligned ids and logprobs). */
export interface TokenDelta {
  ids: number[];
  logprobs: number[];
  /** The weights version the engine reported with these tokens (null: it reports none). */
  policyVersion: number | null;
}

/** A streamed generation: {@link GenerateStream.deltas} until it ends, then its whole {@link GenerateStream.result}. */
export interface GenerateStream {
  /**
   * The output in order; ends when the engine finished. Throws like generate (unreachable, protocol,
   * `signal.reason` when aborted); leaving the loop early cancels the engine's request.
   */
  deltas: AsyncIterable<TokenDelta>;
  /** The finished generation, exactly as generate would return it; throws before deltas ended. */
  result(): GenerateResult;
}

/** vLLM's sampling controls beyond temperature, top-p, seed and stop tokens, as {@link GenerateRequest} names them. */
export type SamplingControlName = "logitBias" | "repetitionPenalty" | "minTokens" | "ignoreEos";

export interface BackendCapabilities {
  /** Token-id prompts and token-id answers ({@link TokenBackend.generate}); false = text-only traces, not trainable. */
  tokenIds: boolean;
  /** Per-token logprobs of the sampled tokens. */
  logprobs: boolean;
  /** The engine can offload and reload one program's KV ({@link TokenBackend.pause}/{@link TokenBackend.restore}). */
  pauseRestore: boolean;
}

/** One scrape of an engine's load. A null field is one the engine does not report. */
export interface BackendMetrics {
  /** Requests being prefilled or decoded. */
  running: number | null;
  /** Requests queued for a free sequence/slot. */
  waiting: number | null;
  /** KV-cache usage, 0-1. */
  kvUsage: number | null;
  /** KV-cache capacity in tokens (block_size x num_gpu_blocks, max_total_num_tokens, n_ctx x slots). */
  kvCapacityTokens: number | null;
  /** Cumulative prompt tokens looked up in the prefix cache, and those found. */
  prefixCacheQueries: number | null;
  prefixCacheHits: number | null;
  /** Prefix-cache hit rate, 0-1, where the engine reports a rate rather than counters (SGLang). */
  prefixCacheHitRate: number | null;
}

/**
 * What to turn into token ids with the engine's own tokenizer: chat messages through its chat
 * template, or plain text (a completions prompt, a stop string).
 */
export type TokenizeRequest =
  | {
      messages: ChatMessage[];
      addGenerationPrompt: boolean;
      /**
       * Leave the final (assistant) message open, its content continued: vLLM's `continue_final_message`
       * (with `addGenerationPrompt` false). A backend whose engine cannot render it refuses it.
       */
      continueFinalMessage?: boolean;
      /** OpenAI tool definitions, for templates that render them (as the engine's chat endpoint would). */
      tools?: unknown[];
      /**
       * OpenAI `tool_choice`; Arbor's engine appends a forced call's opening after the generation
       * prompt (vLLM's /tokenize has no such field: adapters for it leave it out). The gateway's
       * token path does not use it: it appends the opening in the backend's tool-call format itself,
       * the same way for every engine (a text tokenized with `parseSpecial`).
       */
      toolChoice?: unknown;
      signal?: AbortSignal;
    }
  | {
      text: string;
      addSpecialTokens: boolean;
      /**
       * Read the text of special tokens (`<tool_call>`, `[TOOL_CALLS]`, `<|tool_call|>`) as their ids,
       * as llama.cpp's parse_special and Hugging Face tokenizers do (the gateway tokenizes a forced
       * call's opening so); default false: plain text.
       */
      parseSpecial?: boolean;
      signal?: AbortSignal;
    };

export interface TokenizeResult {
  tokens: number[];
  /** The engine's context length (vLLM's max_model_len), when it reports one. */
  maxModelLen: number | null;
}

/** A {@link Backend} that also speaks token ids, reports its load and says what it can do. */
export interface TokenBackend extends Backend {
  readonly type: string;
  readonly capabilities: BackendCapabilities;
  /**
   * The served model's tool-call format (config `backends[].toolParser`): the gateway's token path
   * reads tool calls from the generated text with it, for every engine type. Absent: the gateway
   * cannot read this model's calls, and chat requests with tools go through the passthrough.
   */
  readonly toolParser?: ToolCallParser;
  /** The served model's reasoning format (config `backends[].reasoningParser`); absent: none split out. */
  readonly reasoningParser?: ReasoningParser;
  /**
   * The sampling controls `generate` carries to the engine with their vLLM semantics (absent = none):
   * the gateway refuses a call that sets another one rather than let it be silently ignored.
   */
  readonly samplingControls?: readonly SamplingControlName[];
  /**
   * Generate from a token-id prompt. Throws {@link BackendUnreachableError} when the engine cannot
   * be reached, `signal.reason` when aborted, {@link BackendHttpError} for an upstream error answer,
   * {@link BackendProtocolError} for an answer without the needed fields, {@link BackendCapabilityError}
   * when the engine has no token-level API.
   */
  generate(req: GenerateRequest): Promise<GenerateResult>;
  /**
   * Generate from a token-id prompt, streamed: resolves once the engine accepted the request (same
   * errors as generate before that), then yields the output token by token. Absent where the engine
   * cannot stream token ids; the gateway then streams through the passthrough.
   */
  generateStream?(req: GenerateRequest): Promise<GenerateStream>;
  /**
   * Token ids of a chat conversation or a text, exactly as the engine's own template and tokenizer
   * make them (its /tokenize); absent where the engine has no such endpoint. Same errors as generate.
   */
  tokenize?(req: TokenizeRequest): Promise<TokenizeResult>;
  /** Text of token ids, decoded by the engine (its /detokenize); present exactly when `tokenize` is. */
  detokenize?(tokenIds: number[], signal?: AbortSignal): Promise<string>;
  /** Read the engine's /metrics (and its static capacity); same network errors as generate. */
  scrapeMetrics(): Promise<BackendMetrics>;
  /** Offload a program's KV on the engine (only when `capabilities.pauseRestore`). */
  pause?(programId: string): Promise<void>;
  /**
   * Bring a paused program's KV back (only when `capabilities.pauseRestore`); also called on an engine
   * that did not pause it, after {@link TokenBackend.shareProgram} on the one that did. Resolves with
   * the tokens of the program's KV the engine can load now, where it says (0: its next call re-prefills).
   */
  restore?(programId: string): Promise<{ kvTokens: number } | void>;
  /**
   * Move a paused program's KV to the tier this engine shares with others (its L3: a store of the
   * process, or the global KV pool), so that another engine's restore can load it. Absent where the
   * engine type has no such tier; an engine without one refuses with HTTP 400.
   */
  shareProgram?(programId: string): Promise<void>;
}

/** Whether a backend implements the token-level methods. */
export function isTokenBackend(b: Backend): b is TokenBackend {
  return typeof (b as Partial<TokenBackend>).generate === "function" && typeof (b as Partial<TokenBackend>).capabilities === "object";
}

/** The engine answered an inference or control call with an error status. */
export class BackendHttpError extends ArborError {
  constructor(
    readonly backend: string,
    readonly url: string,
    readonly status: number,
    detail: string,
    /** The engine's error body as parsed JSON, when it sent one (relayed to clients as is). */
    readonly body?: unknown,
  ) {
    super(`backend '${backend}' at ${url} answered HTTP ${status}: ${detail}`, "backend_http");
  }
}

/** The backend cannot do what was asked (e.g. token-level generation on a generic OpenAI endpoint). */
export class BackendCapabilityError extends ArborError {
  constructor(
    readonly backend: string,
    readonly url: string,
    problem: string,
  ) {
    super(`backend '${backend}' at ${url} ${problem}`, "backend_capability");
  }
}
