// Arbor's own chat template as a ChatFormat: the tiny policy's `<|role|> … <|end|>` turns rendered
// straight to ids by renderChat (chat-template.ts). An assistant turn's tool calls are written after
// its text in the policy's tool-call markup, exactly as the policy emits them.
import type { ChatMessage } from "../core/types.js";
import type { ChatFormat, ChatRenderOptions } from "./chat-format.js";
import { renderChat } from "./chat-template.js";
import { toolCallsAsMarkup } from "./tool-markup.js";
import { Vocab } from "./vocab.js";

/** Arbor's template over its vocabulary; see the file header. */
export class ArborChatFormat implements ChatFormat {
  readonly name = "arbor";

  constructor(private readonly vocab: Vocab = new Vocab()) {}

  render(messages: readonly ChatMessage[], opts: ChatRenderOptions): number[] {
    return renderChat(withMarkup(messages), (t) => this.vocab.encode(t), this.vocab, {
      addGenerationPrompt: opts.addGenerationPrompt,
      ...(opts.continueFinalMessage === true ? { continueFinalMessage: true } : {}),
      ...(opts.tools ? { tools: opts.tools } : {}),
    });
  }
}

/** Messages with assistant tool calls folded into their content as markup (what renderChat reads). */
function withMarkup(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((m) => {
    if (m.role !== "assistant" || !m.toolCalls || m.toolCalls.length === 0) return m;
    const calls = m.toolCalls.map((c) => ({ function: { name: c.name, arguments: c.arguments } }));
    return { role: m.role, content: toolCallsAsMarkup(m.content, calls), ...(m.name !== undefined ? { name: m.name } : {}) };
  });
}
