// Context size in tokens, exact where the engine said so: each call's usage gives the exact size
// of the messages it saw plus its answer; messages added since are estimated with the tokens-per-
// character ratio measured on the calls so far (so it adapts to any tokenizer).
import { messageChars, type AgentMessage } from "./agent-message.js";

/** Tokens a message costs besides its text (role and end markers). */
const PER_MESSAGE_TOKENS = 2;

interface KnownPrefix {
  messages: readonly AgentMessage[];
  tokens: number;
}

export class TokenMeter {
  private ratio: number;
  /** The first call's prompt (the task messages) and the last call's prompt + answer. */
  private first: KnownPrefix | undefined;
  private last: KnownPrefix | undefined;

  /** `charsPerToken`: the estimate before any call was measured (default 4). */
  constructor(charsPerToken = 4) {
    this.ratio = 1 / charsPerToken;
  }

  /** Record a call: the messages it was sent, its answer message, and the engine's usage. */
  observe(sent: readonly AgentMessage[], answer: AgentMessage, promptTokens: number, completionTokens: number): void {
    const chars = sent.reduce((n, m) => n + messageChars(m), 0);
    if (chars > 0 && promptTokens > 0) this.ratio = Math.max(1e-3, (promptTokens - PER_MESSAGE_TOKENS * sent.length) / chars);
    this.first ??= { messages: [...sent], tokens: promptTokens };
    this.last = { messages: [...sent, answer], tokens: promptTokens + completionTokens };
  }

  /** Tokens of `messages`: the longest exactly-known prefix plus an estimate of the rest. */
  count(messages: readonly AgentMessage[]): number {
    let base = 0;
    let from = 0;
    for (const known of [this.last, this.first]) {
      if (known && known.messages.length > from && isPrefix(known.messages, messages)) {
        base = known.tokens;
        from = known.messages.length;
      }
    }
    return base + this.estimate(messages.slice(from));
  }

  /** Estimated tokens of messages never measured. */
  estimate(messages: readonly AgentMessage[]): number {
    return messages.reduce((n, m) => n + PER_MESSAGE_TOKENS + Math.ceil(messageChars(m) * this.ratio), 0);
  }
}

function isPrefix(prefix: readonly AgentMessage[], of: readonly AgentMessage[]): boolean {
  if (prefix.length > of.length) return false;
  return prefix.every((m, i) => m === of[i]);
}
