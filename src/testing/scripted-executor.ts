// The one test double for the policy: an Executor that answers each prompt with text (or token ids)
// chosen by a script, tokenized with Arbor's vocabulary (tool-call markers as their control tokens,
// as the policy emits them) and streamed token by token. The untrained tiny policy never calls
// tools; tests of tool calling through the real HTTP surfaces script the output instead. Optional
// hooks make timing deterministic: `hold` keeps a generation back before its first token, `paced`
// makes every token wait for the test's `tick()`.
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";
import { ArborError } from "../core/errors.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import { Vocab } from "../model/vocab.js";
import { checkGenerateRequest, type Executor, type ExecutorStats, type GenerateRequest, type GenerateResult } from "../engine/executor.js";
import type { SampledToken } from "../engine/sampling.js";

/** Output given as token ids: `tokenIds`, then `stopTokenId` when the answer ends with one. */
export interface ScriptedTokens {
  tokenIds: readonly number[];
  /** Absent: the answer runs to max_tokens (finish reason "length"). */
  stopTokenId?: number;
}

/** Chooses the answer from the prompt, decoded (control tokens as their names): text (ended by `<|end|>`) or token ids. */
export type AnswerScript = (prompt: string, req: GenerateRequest) => string | ScriptedTokens;

export interface ScriptedExecutorOptions {
  /** Context length of one sequence (default 4096). */
  contextSize?: number;
  /** Sequences it claims to decode together (default 2). */
  sequences?: number;
  /**
   * Called before a generation's first token: a promise to wait for, or undefined to start now.
   * The generation ends with finish reason "abort" and no tokens when its request is aborted
   * meanwhile, or when the promise resolves to true.
   */
  hold?: (prompt: string, req: GenerateRequest) => Promise<boolean | void> | undefined;
  /** Each token waits for {@link ScriptedExecutor.tick} (deterministic timing against running requests). */
  paced?: PacedOptions;
  /**
   * A model's own tokenizer instead of Arbor's vocabulary (the engine then serves that model): ids
   * are its ids, prompts are decoded with special tokens as their text, and a text answer is
   * encoded with special-token text parsed and ends with the tokenizer's EOS (else its first stop id).
   */
  tokenizer?: ModelTokenizer;
}

export interface PacedOptions {
  /** After its last token a generation waits for one more tick, and ends with "abort" if aborted meanwhile. */
  lateAbort?: boolean;
  /** An abort is seen only at the next tick (as when it lands in the middle of a decode step). */
  slowAbort?: boolean;
}

/** Resolves when `until` resolves or `signal` aborts; true when it aborted. */
export function waitOrAbort(until: Promise<unknown>, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    if (signal?.aborted) return resolve(true);
    void until.then(() => resolve(false));
    signal?.addEventListener("abort", () => resolve(true), { once: true });
  });
}

/** Answers by script; every token gets logprob -0.5 - i/1024 (distinct, valid). */
export class ScriptedExecutor implements Executor {
  readonly vocabSize: number;
  readonly contextSize: number;
  readonly sequences: number;
  /** Prompts seen, decoded, in order. */
  readonly prompts: string[] = [];
  /** Every request it was given, in order. */
  readonly requests: GenerateRequest[] = [];
  /** Every output it produced, in order (token ids), to compare with what a store recorded. */
  readonly outputs: number[][] = [];
  /** Generations in progress. */
  running = 0;
  /** Tokens produced so far, over all generations. */
  produced = 0;
  closed = false;
  private readonly opts: ScriptedExecutorOptions;
  readonly tokenizer?: ModelTokenizer;
  private readonly vocab = new Vocab();
  private gates: (() => void)[] = [];

  constructor(
    private readonly script: AnswerScript,
    contextSizeOrOptions: number | ScriptedExecutorOptions = {},
  ) {
    const opts = typeof contextSizeOrOptions === "number" ? { contextSize: contextSizeOrOptions } : contextSizeOrOptions;
    this.opts = opts;
    if (opts.tokenizer) this.tokenizer = opts.tokenizer;
    this.vocabSize = this.tokenizer?.size ?? this.vocab.size;
    this.contextSize = opts.contextSize ?? 4096;
    this.sequences = opts.sequences ?? 2;
  }

  tokenize(text: string): number[] {
    return (this.tokenizer ?? this.vocab).encode(text);
  }

  /** Text in which the tool-call markers stand for their control tokens, as token ids. */
  encodeWithControls(text: string): number[] {
    return text
      .split(/(<\|tool_call\|>|<\|\/tool_call\|>)/)
      .flatMap((part) => (part === TOOL_CALL_OPEN || part === TOOL_CALL_CLOSE ? [this.vocab.controlId(part)] : this.vocab.encode(part)));
  }

  /** A text answer as ids and the stop token that ends it (see {@link ScriptedExecutorOptions.tokenizer}). */
  private encodeAnswer(text: string): ScriptedTokens {
    if (!this.tokenizer) return { tokenIds: this.encodeWithControls(text), stopTokenId: this.vocab.controlId("<|end|>") };
    const stop = this.tokenizer.eosId ?? this.tokenizer.stopIds[0];
    return { tokenIds: this.tokenizer.encode(text, { special: true }), ...(stop !== undefined ? { stopTokenId: stop } : {}) };
  }

  /** Let every paced generation produce one more token. */
  tick(): void {
    for (const g of this.gates.splice(0)) g();
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    // As every executor (executor.contract.ts): a closed engine answers nothing more.
    if (this.closed) throw new ArborError("engine is shut down", "closed");
    checkGenerateRequest(req, this);
    const prompt = this.tokenizer ? this.tokenizer.decode(req.promptTokenIds, { special: true }) : this.vocab.decode([...req.promptTokenIds]);
    this.prompts.push(prompt);
    this.requests.push(req);
    this.running++;
    try {
      const held = this.opts.hold?.(prompt, req);
      if (held && ((await waitOrAbort(held, req.signal)) || (await held) === true)) return { tokens: [], finishReason: "abort" };
      const answer = this.script(prompt, req);
      const { tokenIds, stopTokenId } = typeof answer === "string" ? this.encodeAnswer(answer) : answer;
      const all = stopTokenId === undefined ? [...tokenIds] : [...tokenIds, stopTokenId];
      const ids = all.slice(0, req.maxTokens);
      this.outputs.push(ids);
      const tokens: SampledToken[] = [];
      for (const [i, id] of ids.entries()) {
        if (this.opts.paced) await this.gate(req.signal);
        if (req.signal?.aborted) return { tokens, finishReason: "abort" };
        const t = { id, logprob: -0.5 - i / 1024, top: [] };
        tokens.push(t);
        this.produced++;
        req.onToken?.(t);
      }
      if (this.opts.paced?.lateAbort) {
        await this.gate(req.signal);
        if (req.signal?.aborted) return { tokens, finishReason: "abort" };
      }
      return stopTokenId !== undefined && ids.length === all.length ? { tokens, finishReason: "stop", stopTokenId } : { tokens, finishReason: "length" };
    } finally {
      this.running--;
    }
  }

  stats(): ExecutorStats {
    return { running: this.running, waiting: 0, usedTokens: 0, totalTokens: this.contextSize * this.sequences };
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private gate(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      this.gates.push(resolve);
      if (!this.opts.paced?.slowAbort) signal?.addEventListener("abort", () => resolve(), { once: true });
    });
  }
}
