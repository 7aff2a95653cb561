// How the fake vLLM server (fake-vllm.ts) turns text into ids and back: its byte-level fake (one token
// per UTF-8 byte, `<|role|>` markers; tests' default) or a real model's tokenizer and chat template
// (`arbor bench gateway`, so that the gateway's in-process tokenizer can be checked against it and a
// prompt is as many ids as a real engine's). The fake's replies are the same either way: an echo of
// the prompt's tail, tokenized by the same tokenizer.
import type { ChatMessage } from "../core/types.js";
import type { ChatToolSpec } from "../model/chat-template.js";
import type { ServedTokenizer } from "./local-tokenizer.js";

/** What the fake needs of a tokenizer. */
export interface FakeTokenizer {
  /** Prompt ids of chat messages (and OpenAI tools, which the byte-level fake leaves out) and the text the reply echoes. */
  chat(messages: { role: string; content: string }[], addGenerationPrompt: boolean, tools?: unknown[]): { ids: number[]; text: string };
  /** Ids of a text prompt (BOS first when `addSpecialTokens` and the tokenizer adds one). */
  text(prompt: string, addSpecialTokens: boolean): number[];
  /** The text the reply to a token-id prompt echoes. */
  promptText(ids: readonly number[]): string;
  /** The reply to a prompt text, cut to `maxTokens` ("stop": it ended by itself). */
  reply(promptText: string, maxTokens: number): { ids: number[]; text: string; finish: "stop" | "length" };
  /** Text and bytes of one token (logprob listings), and the id of its j-th alternative. */
  tokenText(id: number): string;
  tokenBytes(id: number): number[];
  alternative(id: number, j: number): number;
  /** Text of ids (/detokenize), or undefined when an id is not a token. */
  detokenize(ids: readonly unknown[]): string | undefined;
  /** Why /detokenize refused. */
  readonly badTokens: string;
}

/** The fake tokenizer: one token per UTF-8 byte. */
export function fakeTokenize(text: string): number[] {
  return [...Buffer.from(text, "utf8")];
}

/**
 * Render chat messages the way the fake "template" does before tokenizing (a render without the
 * generation prompt leaves out the trailing `<|assistant|>`, as /tokenize with add_generation_prompt false).
 */
export function fakeChatPrompt(messages: { role: string; content: string }[], addGenerationPrompt = true): string {
  return messages.map((m) => `<|${m.role}|>${m.content}`).join("") + (addGenerationPrompt ? "<|assistant|>" : "");
}

/** The deterministic reply text for a prompt text (before max_tokens truncation). */
export function fakeReplyText(promptText: string): string {
  return `echo: ${promptText.slice(-16)}`;
}

/** The byte-level fake. */
export const byteTokenizer: FakeTokenizer = {
  chat(messages, addGenerationPrompt) {
    const text = fakeChatPrompt(messages, addGenerationPrompt);
    return { ids: fakeTokenize(text), text };
  },
  text: (prompt) => fakeTokenize(prompt),
  promptText: (ids) => Buffer.from(ids.map((x) => x & 0xff)).toString("latin1"),
  reply(promptText, maxTokens) {
    const full = fakeTokenize(fakeReplyText(promptText));
    const ids = full.slice(0, maxTokens);
    return { ids, text: Buffer.from(ids).toString("utf8"), finish: ids.length < full.length ? "length" : "stop" };
  },
  tokenText: (id) => Buffer.from([id]).toString("latin1"),
  tokenBytes: (id) => [id],
  alternative: (id, j) => (id + j) % 256,
  detokenize: (ids) => (ids.every((t) => Number.isInteger(t) && (t as number) >= 0 && (t as number) < 256) ? Buffer.from(ids as number[]).toString("utf8") : undefined),
  badTokens: "tokens: must be a list of byte ids (0-255)",
};

/**
 * A real model's tokenizer and template, as an engine serving it answers (engine/http/tokenize-routes.ts);
 * a reply that ends by itself ends with the model's EOS (the end of its turn, e.g. ChatML's `<|im_end|>`),
 * as an engine's output does.
 */
export function realTokenizer(served: ServedTokenizer): FakeTokenizer {
  const tok = served.tokenizer;
  const stop = tok.eosId ?? tok.stopIds[0];
  return {
    chat(messages, addGenerationPrompt, tools) {
      // As vLLM hands them to the template: each OpenAI tool's function (name, description, parameters).
      const specs = (tools ?? []).map((t) => (t as { function: ChatToolSpec }).function);
      const ids = served.chat.render(messages as ChatMessage[], { addGenerationPrompt, ...(specs.length ? { tools: specs } : {}) });
      return { ids, text: tok.decode(ids) };
    },
    text(prompt, addSpecialTokens) {
      const ids = tok.encode(prompt, { special: !served.arbor });
      if (addSpecialTokens && tok.addBos && tok.bosId !== undefined) ids.unshift(tok.bosId);
      return ids;
    },
    promptText: (ids) => tok.decode(ids),
    reply(promptText, maxTokens) {
      const full = [...tok.encode(fakeReplyText(promptText)), ...(stop !== undefined ? [stop] : [])];
      const ids = full.slice(0, maxTokens);
      const finish = ids.length < full.length ? "length" : "stop";
      return { ids, text: tok.decode(finish === "stop" && stop !== undefined ? ids.slice(0, -1) : ids), finish };
    },
    tokenText: (id) => tok.tokenText(id),
    tokenBytes: (id) => tok.tokenBytes(id),
    alternative: (id, j) => (id + j) % tok.size,
    detokenize: (ids) => (ids.every((t) => Number.isInteger(t) && (t as number) >= 0 && (t as number) < tok.size) ? tok.decode(ids as number[], { special: !served.arbor }) : undefined),
    badTokens: `tokens: must be a list of token ids (0-${tok.size - 1})`,
  };
}
