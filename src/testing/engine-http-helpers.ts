// Test helpers for the engine's HTTP layer: an executor whose steps the test releases one at a time
// (deterministic timing of weight switches against running requests), and small request helpers.
import { expect } from "vitest";
import { Vocab } from "../model/vocab.js";
import type { Executor, ExecutorStats, GenerateRequest, GenerateResult } from "../engine/executor.js";
import type { SampledToken } from "../engine/sampling.js";
import type { EngineServer } from "../engine/server.js";

const vocab = new Vocab();

export interface GatedExecutorOptions {
  /** The output token at this index is `</s>` (finish reason "stop"). */
  stopAt?: number;
  /** After its last token a generation waits for one more tick, and ends with "abort" if aborted meanwhile. */
  lateAbort?: boolean;
  /** An abort is seen only at the next tick (as when it lands in the middle of a decode step). */
  slowAbort?: boolean;
}

/** An executor whose generations advance one token per {@link tick}; its tokens spell its letter. */
export class GatedExecutor implements Executor {
  readonly vocabSize = vocab.size;
  readonly contextSize = 128;
  readonly sequences = 2;
  running = 0;
  produced = 0;
  closed = false;
  /** Every request it was given, in order. */
  readonly requests: GenerateRequest[] = [];
  private gates: (() => void)[] = [];

  constructor(
    private readonly letter: string,
    private readonly opts: GatedExecutorOptions = {},
  ) {}

  tokenize(text: string): number[] {
    return vocab.encode(text);
  }

  stats(): ExecutorStats {
    return { running: this.running, waiting: 0, usedTokens: 0, totalTokens: 256 };
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** Let every running generation produce one more token. */
  tick(): void {
    for (const g of this.gates.splice(0)) g();
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    if (this.closed) throw new Error("closed");
    this.requests.push(req);
    this.running++;
    const tokens: SampledToken[] = [];
    try {
      for (;;) {
        await this.gate(req.signal);
        if (req.signal?.aborted) return { tokens, finishReason: "abort" };
        const id = tokens.length === this.opts.stopAt ? vocab.eosId : vocab.encode(this.letter)[0]!;
        const tok = { id, logprob: -0.5, top: [] };
        tokens.push(tok);
        this.produced++;
        req.onToken?.(tok);
        const end: GenerateResult | null =
          id === vocab.eosId ? { tokens, finishReason: "stop", stopTokenId: id } : tokens.length >= req.maxTokens ? { tokens, finishReason: "length" } : null;
        if (!end) continue;
        if (this.opts.lateAbort) {
          await this.gate(req.signal);
          if (req.signal?.aborted) return { tokens, finishReason: "abort" };
        }
        return end;
      }
    } finally {
      this.running--;
    }
  }

  private gate(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      this.gates.push(resolve);
      if (!this.opts.slowAbort) signal?.addEventListener("abort", () => resolve(), { once: true });
    });
  }
}

/** Wait (event-loop turns, no timers) until `cond` holds. */
export async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; !cond() && i < 100_000; i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}

/** Advance every generation of `ex` by one token and wait until it is produced. */
export async function step(ex: GatedExecutor): Promise<void> {
  const target = ex.produced + ex.running;
  ex.tick();
  await until(() => ex.produced >= target);
}

/** POST a JSON body through `app.inject`. */
export async function post(target: EngineServer, url: string, payload: unknown) {
  const res = await target.app.inject({ method: "POST", url, payload: payload as object });
  return { status: res.statusCode, body: res.json(), headers: res.headers, text: res.body };
}
