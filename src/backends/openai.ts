// Adapter for any OpenAI-compatible endpoint without token ids: chat/completions pass through, but
// nothing token-level exists, so the gateway records such traces as text-only and not trainable.
import type { Clock } from "../core/clock.js";
import { BackendCapabilityError, type TokenBackend } from "./backend.js";
import { createBuiltinBackend } from "./builtin.js";

export interface OpenAiBackendOptions {
  name: string;
  /** Base URL ending in /v1. */
  url: string;
  clock?: Clock;
  probeTimeoutMs?: number;
  /** The provider's model every call is sent with, whatever the client named (absent: the client's). */
  model?: string;
}

/** Create a text-only {@link TokenBackend}: `generate` throws, metrics are all unknown. */
export function createOpenAiBackend(opts: OpenAiBackendOptions): TokenBackend {
  const base = createBuiltinBackend(opts);
  return {
    ...base,
    type: "openai",
    capabilities: { tokenIds: false, logprobs: false, pauseRestore: false },
    async generate() {
      throw new BackendCapabilityError(
        base.name,
        base.url,
        "is a generic OpenAI endpoint without token ids: it cannot generate from a token-id prompt (its traces are text-only and not trainable)",
      );
    },
    // A generic provider has no /metrics: the gateway falls back to its own in-flight counts.
    async scrapeMetrics() {
      return { running: null, waiting: null, kvUsage: null, kvCapacityTokens: null, prefixCacheQueries: null, prefixCacheHits: null, prefixCacheHitRate: null };
    },
  };
}
