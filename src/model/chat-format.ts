// How a model turns a conversation into prompt ids: Arbor's own template (chat-template.ts) or the
// model's Jinja chat template from its GGUF / tokenizer_config.json (jinja-chat-format.ts). The
// engine renders prompts with it, /tokenize reports them, the gateway's token path diffs two renders
// of it, and SFT renders golden conversations with it: one render for all of them.
import type { ChatMessage } from "../core/types.js";
import type { ChatToolSpec } from "./chat-template.js";

export interface ChatRenderOptions {
  /** Open an assistant turn at the end so the model continues as the assistant. */
  addGenerationPrompt: boolean;
  /**
   * Leave the final message (an assistant turn) open so the model continues its content: vLLM's and
   * transformers' `continue_final_message` (the "prefill" of Anthropic's Messages API). Only with
   * `addGenerationPrompt` false; the caller checks that the last message is the assistant's.
   */
  continueFinalMessage?: boolean;
  /** Tools declared to the model (the template decides where and how they appear). */
  tools?: readonly ChatToolSpec[];
}

/** A model's chat template. */
export interface ChatFormat {
  /** Short name for errors and logs (e.g. "arbor", "jinja:qwen2.5"). */
  readonly name: string;
  /** Prompt ids of `messages` (BOS included where the template or tokenizer puts one). */
  render(messages: readonly ChatMessage[], opts: ChatRenderOptions): number[];
  /** The rendered text (the ids are `encode(text, {special: true})` of it, BOS included in it). */
  renderText?(messages: readonly ChatMessage[], opts: ChatRenderOptions): string;
}

/** A template that cannot render a conversation; the message names the template and the reason. */
export class ChatTemplateError extends Error {
  constructor(
    readonly template: string,
    readonly reason: string,
  ) {
    super(`chat template ${template}: ${reason}`);
    this.name = "ChatTemplateError";
  }
}
