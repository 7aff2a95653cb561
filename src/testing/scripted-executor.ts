// A test double for the policy: an Executor that answers each prompt with text chosen by a script,
// tokenized with Arbor's vocabulary (tool-call markers as their control tokens, as the policy emits
// them) and streamed token by token. The untrained tiny policy never calls tools; tests of tool
// calling through the real HTTP surfaces script the output instead.
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "../model/markup.js";
import { ArborError } from "../core/errors.js";
import { Vocab } from "../model/vocab.js";
import { checkGenerateRequest, type Executor, type ExecutorStats, type GenerateRequest, type GenerateResult } from "../engine/executor.js";

/** Chooses the answer text from the prompt, decoded (control tokens as their names). */
export type AnswerScript = (prompt: string, req: GenerateRequest) => string;

/** Answers by script; every token gets logprob -0.5 - i/1024 (distinct, valid). */
export class ScriptedExecutor implements Executor {
  readonly vocabSize: number;
  readonly sequences = 2;
  /** Prompts seen, decoded, in order. */
  readonly prompts: string[] = [];
  private readonly vocab = new Vocab();
  private closed = false;

  constructor(
    private readonly script: AnswerScript,
    readonly contextSize = 4096,
  ) {
    this.vocabSize = this.vocab.size;
  }

  tokenize(text: string): number[] {
    return this.vocab.encode(text);
  }

  /** Text in which the tool-call markers stand for their control tokens, as token ids. */
  encodeWithControls(text: string): number[] {
    return text
      .split(/(<\|tool_call\|>|<\|\/tool_call\|>)/)
      .flatMap((part) => (part === TOOL_CALL_OPEN || part === TOOL_CALL_CLOSE ? [this.vocab.controlId(part)] : this.vocab.encode(part)));
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    // As every executor (executor.contract.ts): a closed engine answers nothing more.
    if (this.closed) throw new ArborError("engine is shut down", "closed");
    checkGenerateRequest(req, this);
    const prompt = this.vocab.decode([...req.promptTokenIds]);
    this.prompts.push(prompt);
    const end = this.vocab.controlId("<|end|>");
    const all = [...this.encodeWithControls(this.script(prompt, req)), end];
    const ids = all.slice(0, req.maxTokens);
    const tokens = ids.map((id, i) => ({ id, logprob: -0.5 - i / 1024, top: [] }));
    for (const t of tokens) {
      if (req.signal?.aborted) return { tokens: tokens.slice(0, tokens.indexOf(t)), finishReason: "abort" };
      req.onToken?.(t);
    }
    return ids.length === all.length ? { tokens, finishReason: "stop", stopTokenId: end } : { tokens, finishReason: "length" };
  }

  stats(): ExecutorStats {
    return { running: 0, waiting: 0, usedTokens: 0, totalTokens: this.contextSize * this.sequences };
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
