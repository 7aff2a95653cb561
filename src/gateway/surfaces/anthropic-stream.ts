// Converts a stream of OpenAI chat.completion.chunk objects into Anthropic's stream events, in the
// order the Messages API sends them, and formats them as SSE. A pure state machine: the HTTP shell
// feeds chunks in and writes the returned events out.
import { AnthropicError } from "./anthropic-error.js";
import { messageIdFor, toStopReason, type OpenAiUsage } from "./anthropic-response.js";
import type { AnthropicStreamEvent } from "./anthropic-types.js";

/** The fields of an OpenAI chat.completion.chunk this converter reads. */
export interface ChatChunkLike {
  id?: string;
  choices?: {
    delta?: {
      content?: string | null;
      tool_calls?: { index: number; id?: string; function?: { name?: string; arguments?: string } }[] | null;
      reasoning_content?: string | null;
    };
    finish_reason?: string | null;
    stop_reason?: string | number | null;
  }[];
  usage?: OpenAiUsage | null;
}

type OpenBlock = { kind: "thinking"; index: number } | { kind: "text"; index: number } | { kind: "tool"; index: number; toolIndex: number };

/**
 * Stateful converter: `push` each upstream chunk, then `finish` when the upstream stream ends.
 * Emits message_start, then per block content_block_start / _delta… / _stop, then message_delta
 * (stop_reason, usage) and message_stop. Tool calls must arrive one after another (as vLLM and
 * SGLang send them): a delta for an already-closed tool call is an upstream protocol error.
 */
export class ChatChunkToAnthropicEvents {
  private started = false;
  private finished = false;
  private open: OpenBlock | null = null;
  private nextBlock = 0;
  private readonly closedTools = new Set<number>();
  private finishReason: string | null = null;
  private engineStopReason: string | number | null = null;
  private usage: OpenAiUsage | null = null;
  private messageId = "";

  constructor(
    private readonly requestModel: string,
    /** Input tokens to announce in message_start when known before the answer (e.g. from the gateway's own count). */
    private readonly promptTokens = 0,
  ) {}

  /** Translate one upstream chunk into zero or more Anthropic events. */
  push(chunk: ChatChunkLike): AnthropicStreamEvent[] {
    if (this.finished) throw new Error("ChatChunkToAnthropicEvents: push after finish");
    const out: AnthropicStreamEvent[] = [];
    this.start(chunk.id, out);
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) return out;
    // Reasoning comes before the answer: a thinking block, its text as thinking_delta events.
    const thinking = choice.delta?.reasoning_content;
    if (typeof thinking === "string" && thinking !== "") {
      if (this.open?.kind !== "thinking") this.openBlock(out, { kind: "thinking" }, { type: "thinking", thinking: "", signature: "" });
      out.push({ type: "content_block_delta", index: this.nextBlock - 1, delta: { type: "thinking_delta", thinking } });
    }
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      if (this.open?.kind !== "text") this.openBlock(out, { kind: "text" }, { type: "text", text: "" });
      out.push({ type: "content_block_delta", index: this.nextBlock - 1, delta: { type: "text_delta", text } });
    }
    for (const tc of choice.delta?.tool_calls ?? []) {
      if (!(this.open?.kind === "tool" && this.open.toolIndex === tc.index)) {
        if (this.closedTools.has(tc.index)) throw AnthropicError.upstream(`tool call ${tc.index} continued after another block began`);
        const name = tc.function?.name;
        if (!name) throw AnthropicError.upstream(`tool call ${tc.index} began without a function name`);
        const id = tc.id && tc.id !== "" ? tc.id : `toolu_${this.messageId.slice(4)}_${tc.index}`;
        this.openBlock(out, { kind: "tool", toolIndex: tc.index }, { type: "tool_use", id, name, input: {} });
      }
      const args = tc.function?.arguments;
      if (args) out.push({ type: "content_block_delta", index: this.nextBlock - 1, delta: { type: "input_json_delta", partial_json: args } });
    }
    if (choice.finish_reason) {
      this.finishReason = choice.finish_reason;
      this.engineStopReason = choice.stop_reason ?? null;
    }
    return out;
  }

  /**
   * Close the stream: the last content_block_stop, message_delta and message_stop.
   * Throws {@link AnthropicError} (502) if the upstream never sent a finish_reason (a cut-off stream);
   * the caller then sends {@link anthropicErrorEvent} instead.
   */
  finish(): AnthropicStreamEvent[] {
    if (this.finished) throw new Error("ChatChunkToAnthropicEvents: finish called twice");
    if (this.finishReason === null) throw AnthropicError.upstream("the stream ended without a finish_reason");
    this.finished = true;
    const out: AnthropicStreamEvent[] = [];
    this.start(undefined, out);
    this.closeBlock(out);
    out.push({
      type: "message_delta",
      delta: toStopReason(this.finishReason, this.engineStopReason),
      usage: {
        output_tokens: this.usage?.completion_tokens ?? 0,
        input_tokens: this.usage?.prompt_tokens ?? null,
        cache_read_input_tokens: this.usage?.prompt_tokens_details?.cached_tokens ?? null,
      },
    });
    out.push({ type: "message_stop" });
    return out;
  }

  private start(chatId: string | undefined, out: AnthropicStreamEvent[]): void {
    if (this.started) return;
    this.started = true;
    this.messageId = messageIdFor(chatId, "0");
    out.push({
      type: "message_start",
      message: {
        id: this.messageId,
        type: "message",
        role: "assistant",
        model: this.requestModel,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: this.promptTokens, output_tokens: 0, cache_creation_input_tokens: null, cache_read_input_tokens: null },
      },
    });
  }

  private openBlock(
    out: AnthropicStreamEvent[],
    kind: { kind: "thinking" } | { kind: "text" } | { kind: "tool"; toolIndex: number },
    block: Extract<AnthropicStreamEvent, { type: "content_block_start" }>["content_block"],
  ): void {
    this.closeBlock(out);
    const index = this.nextBlock++;
    this.open = { ...kind, index };
    out.push({ type: "content_block_start", index, content_block: block });
  }

  private closeBlock(out: AnthropicStreamEvent[]): void {
    if (!this.open) return;
    if (this.open.kind === "tool") this.closedTools.add(this.open.toolIndex);
    // Anthropic closes a thinking block with its signature; the engine's reasoning has none.
    if (this.open.kind === "thinking") out.push({ type: "content_block_delta", index: this.open.index, delta: { type: "signature_delta", signature: "" } });
    out.push({ type: "content_block_stop", index: this.open.index });
    this.open = null;
  }
}

/** Format one event as an SSE frame: `event: <type>\ndata: <json>\n\n`. */
export function formatAnthropicSse(event: AnthropicStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** The `error` event to send when a stream fails after its headers went out. */
export function anthropicErrorEvent(err: unknown): AnthropicStreamEvent {
  if (err instanceof AnthropicError) return { type: "error", error: err.body.error };
  return { type: "error", error: { type: "api_error", message: err instanceof Error ? err.message : String(err) } };
}
