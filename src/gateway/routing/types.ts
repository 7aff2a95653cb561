// The vocabulary of routing plugins (filter → score → pick): what a call looks like to the router,
// what a backend looks like, and the two plugin interfaces. Plugins are pure functions of this view.

/** One call to place, as the router sees it. */
export interface RoutingRequest {
  programId: string;
  /** Prompt token ids, when the gateway knows them (from the program's token history). */
  promptTokens?: readonly number[];
  /** Prompt length in tokens; used when `promptTokens` is absent. Defaults to `promptTokens.length` or 0. */
  estimatedPromptTokens?: number;
  /** Consider this backend only (a scheduler above the router, e.g. the pause gate, placed the program). */
  only?: string;
}

/** One backend, as the plugins see it at routing time (a snapshot). */
export interface BackendView {
  name: string;
  /** False while the health checker has it out of rotation. */
  healthy: boolean;
  /** Calls this router placed here that have not finished. */
  inFlight: number;
  /** Calls the gateway holds for this backend but has not sent yet (set by the gateway). */
  queued: number;
  /** Scraped from the engine's metrics (undefined until scraped). */
  running?: number;
  waiting?: number;
  /** Fraction of the engine's KV cache in use, 0..1 (scraped). */
  kvUsage?: number;
  /** Tokens of KV the engine holds in total (vLLM block_size × num_gpu_blocks, SGLang max_total_num_tokens). */
  kvCapacityTokens?: number;
  /** KV block size in tokens, when the engine reports it. */
  blockSize?: number;
  /** Programs whose latest call went here and that are not released. */
  programs: number;
  /** Prompt tokens of this router's in-flight calls here: their KV (decode) load. */
  activeTokens: number;
  /** Uncached prompt tokens of in-flight calls here whose prefill has not finished. */
  activePrefillTokens: number;
  /** Tokens in this backend's approximate prefix tree (what the router believes it has cached). */
  treeTokens: number;
}

/** What a scorer is given: the request, the backends left after filtering, and derived facts. */
export interface ScoreContext {
  readonly request: RoutingRequest;
  readonly backends: readonly BackendView[];
  /** Backend of the program's previous call (undefined for its first call or after release). */
  readonly boundBackend: string | undefined;
  /** Prompt length in tokens (known ids, else the estimate). */
  readonly promptLength: number;
  /**
   * Leading prompt tokens found in each backend's approximate prefix tree, aligned with
   * `backends`; all 0 when the prompt's ids are unknown. Computed once, on first use.
   */
  prefixMatch(): readonly number[];
}

/** Removes backends that must not take this call. Returns a subset of `backends`, in order. */
export interface RoutingFilter {
  readonly name: string;
  filter(request: RoutingRequest, backends: readonly BackendView[]): BackendView[];
}

/** Scores each backend in [0, 1], higher is better; aligned with `ctx.backends`. */
export interface RoutingScorer {
  readonly name: string;
  score(ctx: ScoreContext): number[];
}

/** Prompt length of a request in tokens. */
export function promptLengthOf(req: RoutingRequest): number {
  return req.promptTokens?.length ?? req.estimatedPromptTokens ?? 0;
}

/** Requests a backend has or is about to have: the load SGLang's router balances. */
export function requestLoad(b: BackendView): number {
  return b.inFlight + b.queued;
}
