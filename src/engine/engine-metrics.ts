// Prometheus metrics of one engine under vLLM's names, so the gateway and dashboards read the
// built-in engine and vLLM alike. Each engine owns its Registry (several engines share a process).
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EngineFinishReason, ExecutorStats } from "./executor.js";

export interface EngineMetricsOptions {
  /** Served model name, the `model_name` label on every series (as vLLM). */
  modelName: string;
  /**
   * Live executor load, read at scrape time. Its counters (prefix cache, preemptions, speculation) must never go
   * down: an engine sums them over every executor it served (ExecutorSlot.counters).
   */
  stats: () => ExecutorStats;
  /** KV cache geometry reported in `vllm:cache_config_info`. */
  blockSize: number;
  numGpuBlocks: number;
}

const FINISH_REASONS: readonly EngineFinishReason[] = ["stop", "length", "abort"];

/** The engine's metric set; `text()` renders the Prometheus exposition format. */
export class EngineMetrics {
  readonly registry = new Registry();
  private readonly promptTokens: Counter;
  private readonly generationTokens: Counter;
  private readonly requestSuccess: Counter<"finished_reason">;
  /** Prompt tokens of finished requests: the query count of executors without a prefix cache. */
  private readonly recordedQueries = { value: 0 };
  private readonly e2eLatency: Histogram;

  constructor(opts: EngineMetricsOptions) {
    const registers = [this.registry];
    this.registry.setDefaultLabels({ model_name: opts.modelName });
    const { stats } = opts;
    new Gauge({
      name: "vllm:num_requests_running",
      help: "Number of requests holding a sequence (being prefilled or decoded).",
      registers,
      collect() {
        this.set(stats().running);
      },
    });
    new Gauge({
      name: "vllm:num_requests_waiting",
      help: "Number of requests waiting for a free sequence.",
      registers,
      collect() {
        this.set(stats().waiting);
      },
    });
    new Gauge({
      name: "vllm:kv_cache_usage_perc",
      help: "KV-cache usage: context tokens held by running requests / total context tokens (0-1).",
      registers,
      collect() {
        const s = stats();
        this.set(s.totalTokens > 0 ? s.usedTokens / s.totalTokens : 0);
      },
    });
    const info = new Gauge({
      name: "vllm:cache_config_info",
      help: "Information of the KV cache configuration.",
      labelNames: ["block_size", "num_gpu_blocks"],
      registers,
    });
    info.set({ block_size: String(opts.blockSize), num_gpu_blocks: String(opts.numGpuBlocks) }, 1);
    // Executors with a prefix cache and preemption (the scheduled ones) report these in their stats;
    // otherwise every prompt token counts as one query that missed, and nothing is preempted.
    const recorded = this.recordedQueries;
    new Counter({
      name: "vllm:prefix_cache_queries_total",
      help: "Prefix cache queries, in queried prompt tokens.",
      registers,
      collect() {
        this.reset();
        this.inc(stats().prefixCacheQueries ?? recorded.value);
      },
    });
    new Counter({
      name: "vllm:prefix_cache_hits_total",
      help: "Prefix cache hits, in prompt tokens served from the cache.",
      registers,
      collect() {
        this.reset();
        this.inc(stats().prefixCacheHits ?? 0);
      },
    });
    new Counter({
      name: "vllm:num_preemptions_total",
      help: "Cumulative number of preemptions (a running request evicted from its sequence).",
      registers,
      collect() {
        this.reset();
        this.inc(stats().preemptions ?? 0);
      },
    });
    // Speculative decoding's counters under the names vLLM's are scraped as (its counters get "_total"), on engines that speculate.
    if (stats().specDecode) {
      const spec = [
        ["vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts (a request's draft verified in one step).", "numDrafts"],
        ["vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "numDraftTokens"],
        ["vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", "numAcceptedTokens"],
      ] as const;
      // An engine drafting from a shared draft service (speculative.draftService) also counts its failures.
      const shared = [
        ["arbor_spec_decode_draft_service_failures_total", "Calls to the shared draft service that failed (unreachable, timed out or refused).", "draftServiceFailures"],
        ["arbor_spec_decode_draft_service_local_steps_total", "Steps that drafted from the engine's own group trees because the shared draft service failed or was skipped.", "draftServiceLocalSteps"],
      ] as const;
      for (const [name, help, field] of [...spec, ...(stats().specDecode?.draftServiceFailures !== undefined ? shared : [])]) {
        new Counter({
          name,
          help,
          registers,
          collect() {
            this.reset();
            this.inc(stats().specDecode?.[field] ?? 0);
          },
        });
      }
    }
    this.promptTokens = new Counter({ name: "vllm:prompt_tokens_total", help: "Number of prefill tokens processed.", registers });
    this.generationTokens = new Counter({ name: "vllm:generation_tokens_total", help: "Number of generation tokens processed.", registers });
    this.requestSuccess = new Counter({
      name: "vllm:request_success_total",
      help: "Count of finished requests by finish reason.",
      labelNames: ["finished_reason"],
      registers,
    });
    for (const r of FINISH_REASONS) this.requestSuccess.inc({ finished_reason: r }, 0);
    this.e2eLatency = new Histogram({
      name: "vllm:e2e_request_latency_seconds",
      help: "End-to-end request latency in seconds (arrival to last token).",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
  }

  /** A request finished: count its tokens (each prompt token was one prefix-cache query), its finish reason and latency. */
  recordFinished(r: { promptTokens: number; generationTokens: number; finishReason: EngineFinishReason; latencyMs: number }): void {
    this.recordedQueries.value += r.promptTokens;
    this.promptTokens.inc(r.promptTokens);
    this.generationTokens.inc(r.generationTokens);
    this.requestSuccess.inc({ finished_reason: r.finishReason });
    this.e2eLatency.observe(Math.max(0, r.latencyMs) / 1000);
  }

  /** Content-Type header for `text()`. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Prometheus exposition text. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
