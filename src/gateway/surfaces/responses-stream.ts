// Converts a stream of OpenAI chat.completion.chunk objects into the Responses API's stream events
// (response.created, response.in_progress, output_item.added, content_part.added,
// reasoning_text.delta / output_text.delta / function_call_arguments.delta, their .done events,
// then response.completed or response.incomplete), numbered by sequence_number. A pure state
// machine plus the SSE framing; the final Response is built by chatToResponse, so streamed and
// plain answers agree. The chunks' `reasoning_content` deltas become a reasoning item before the
// rest, streamed as vLLM streams one (reasoning_text.delta events with content_index 0), except
// that its reasoning_text part is announced with OpenAI's content_part.added / .done where vLLM
// sends its own response.reasoning_part.added / .done: the openai SDKs' stream helpers accumulate
// reasoning_text deltas into a part only content_part.added created, and fail on vLLM's.
import { BackendProtocolError } from "../../backends/backend.js";
import { toOpenAiError } from "../http-errors.js";
import type { ChatChunkLike } from "./anthropic-stream.js";
import type { OpenAiUsage } from "./anthropic-response.js";
import type { ResponsesEcho } from "./responses-request.js";
import {
  chatToResponse,
  type ResponseFunctionCall,
  type ResponseObject,
  type ResponseOutputMessage,
  type ResponseReasoningItem,
  type UpstreamRef,
} from "./responses-response.js";
import { UpstreamStreamError, type StreamSurface } from "./stream-surface.js";

/** One Responses stream event (`type` plus its fields; `sequence_number` is added on emit). */
export type ResponsesStreamEvent = { type: string; sequence_number: number } & Record<string, unknown>;

type OpenItem =
  | { kind: "reasoning"; outputIndex: number; item: ResponseReasoningItem; text: string }
  | { kind: "message"; outputIndex: number; item: ResponseOutputMessage; text: string }
  | { kind: "call"; outputIndex: number; item: ResponseFunctionCall; toolIndex: number };

/**
 * Stateful converter: `push` each upstream chunk, `finish` when the upstream stream ends. Tool calls
 * must arrive one after another (as the built-in engine, vLLM and SGLang send them).
 */
export class ChatChunkToResponseEvents {
  private seq = 0;
  private started = false;
  private core = "";
  private readonly output: ResponseObject["output"] = [];
  private open: OpenItem | null = null;
  private readonly closedTools = new Set<number>();
  private finishReason: string | null = null;
  private usage: OpenAiUsage | null = null;
  private messages = 0;

  constructor(
    private readonly echo: ResponsesEcho,
    private readonly createdAt: number,
    /** Names the response when the upstream chunks carry no id. */
    private readonly fallbackId: string,
    private readonly upstream: UpstreamRef,
  ) {}

  /** Translate one upstream chunk into zero or more events. */
  push(chunk: ChatChunkLike): ResponsesStreamEvent[] {
    const out: ResponsesStreamEvent[] = [];
    this.start(chunk.id, out);
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) return out;
    const reasoning = choice.delta?.reasoning_content;
    if (typeof reasoning === "string" && reasoning !== "") {
      if (this.open?.kind !== "reasoning") this.openReasoning(out);
      const open = this.open as Extract<OpenItem, { kind: "reasoning" }>;
      open.text += reasoning;
      out.push(this.event("response.reasoning_text.delta", { item_id: open.item.id, output_index: open.outputIndex, content_index: 0, delta: reasoning }));
    }
    const text = choice.delta?.content;
    if (typeof text === "string" && text !== "") {
      if (this.open?.kind !== "message") this.openMessage(out);
      const open = this.open as Extract<OpenItem, { kind: "message" }>;
      open.text += text;
      out.push(this.event("response.output_text.delta", { item_id: open.item.id, output_index: open.outputIndex, content_index: 0, delta: text, logprobs: [] }));
    }
    for (const tc of choice.delta?.tool_calls ?? []) {
      if (!(this.open?.kind === "call" && this.open.toolIndex === tc.index)) {
        if (this.closedTools.has(tc.index)) throw this.protocol(`tool call ${tc.index} continued after another output item began`);
        const name = tc.function?.name;
        if (!name) throw this.protocol(`tool call ${tc.index} began without a function name`);
        this.openCall(out, tc.index, tc.id && tc.id !== "" ? tc.id : `call_${this.core}_${tc.index}`, name);
      }
      const args = tc.function?.arguments;
      const open = this.open as Extract<OpenItem, { kind: "call" }>;
      if (args) {
        open.item.arguments += args;
        out.push(this.event("response.function_call_arguments.delta", { item_id: open.item.id, output_index: open.outputIndex, delta: args }));
      }
    }
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    return out;
  }

  /**
   * Close the stream: the open item's .done events and response.completed (or .incomplete).
   * Throws {@link BackendProtocolError} when the upstream never sent a finish_reason.
   */
  finish(): ResponsesStreamEvent[] {
    if (this.finishReason === null) throw this.protocol("the stream ended without a finish_reason");
    const out: ResponsesStreamEvent[] = [];
    this.start(undefined, out);
    const final = this.response();
    this.close(out, final.status === "incomplete");
    final.output = this.output;
    out.push(this.event(final.status === "incomplete" ? "response.incomplete" : "response.completed", { response: final }));
    return out;
  }

  private response(): ResponseObject {
    return chatToResponse(
      { id: this.core, choices: [{ message: { content: "" }, finish_reason: this.finishReason }], usage: this.usage },
      this.echo,
      this.createdAt,
      this.fallbackId,
      this.upstream,
    );
  }

  private start(chatId: string | undefined, out: ResponsesStreamEvent[]): void {
    if (this.started) return;
    this.started = true;
    this.core = idCore(chatId) || idCore(this.fallbackId) || "0";
    const response = chatToResponse({ id: this.core, choices: [{ message: { content: "" }, finish_reason: "stop" }] }, this.echo, this.createdAt, this.fallbackId, this.upstream);
    const inProgress = { ...response, status: "in_progress", usage: null };
    out.push(this.event("response.created", { response: inProgress }));
    out.push(this.event("response.in_progress", { response: inProgress }));
  }

  private openReasoning(out: ResponsesStreamEvent[]): void {
    this.close(out, false);
    // One reasoning item per answer, as the plain answer has (the reasoning comes before the rest).
    if (this.output.some((o) => o.type === "reasoning")) throw this.protocol("reasoning continued after the answer began");
    const id = `rs_${this.core}`;
    const item: ResponseReasoningItem = { type: "reasoning", id, summary: [], content: [], status: "completed" };
    const outputIndex = this.output.length;
    this.output.push(item);
    this.open = { kind: "reasoning", outputIndex, item, text: "" };
    out.push(this.event("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", content: [] } }));
    out.push(this.event("response.content_part.added", { item_id: id, output_index: outputIndex, content_index: 0, part: { type: "reasoning_text", text: "" } }));
  }

  private openMessage(out: ResponsesStreamEvent[]): void {
    this.close(out, false);
    const id = this.messages === 0 ? `msg_${this.core}` : `msg_${this.core}_${this.messages}`;
    this.messages++;
    const item: ResponseOutputMessage = { type: "message", id, role: "assistant", status: "completed", content: [] };
    const outputIndex = this.output.length;
    this.output.push(item);
    this.open = { kind: "message", outputIndex, item, text: "" };
    out.push(this.event("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", content: [] } }));
    out.push(this.event("response.content_part.added", { item_id: id, output_index: outputIndex, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }));
  }

  private openCall(out: ResponsesStreamEvent[], toolIndex: number, callId: string, name: string): void {
    this.close(out, false);
    const item: ResponseFunctionCall = { type: "function_call", id: `fc_${this.core}_${toolIndex}`, call_id: callId, name, arguments: "", status: "completed" };
    const outputIndex = this.output.length;
    this.output.push(item);
    this.open = { kind: "call", outputIndex, item, toolIndex };
    out.push(this.event("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress" } }));
  }

  private close(out: ResponsesStreamEvent[], incomplete: boolean): void {
    const open = this.open;
    if (!open) return;
    this.open = null;
    if (open.kind === "reasoning") {
      const part = { type: "reasoning_text" as const, text: open.text };
      open.item.content = [part];
      if (incomplete) open.item.status = "incomplete";
      out.push(this.event("response.reasoning_text.done", { item_id: open.item.id, output_index: open.outputIndex, content_index: 0, text: open.text }));
      out.push(this.event("response.content_part.done", { item_id: open.item.id, output_index: open.outputIndex, content_index: 0, part }));
    } else if (open.kind === "message") {
      const part = { type: "output_text" as const, text: open.text, annotations: [] as never[] };
      open.item.content = [part];
      if (incomplete) open.item.status = "incomplete";
      out.push(this.event("response.output_text.done", { item_id: open.item.id, output_index: open.outputIndex, content_index: 0, text: open.text, logprobs: [] }));
      out.push(this.event("response.content_part.done", { item_id: open.item.id, output_index: open.outputIndex, content_index: 0, part }));
    } else {
      this.closedTools.add(open.toolIndex);
      out.push(this.event("response.function_call_arguments.done", { item_id: open.item.id, output_index: open.outputIndex, name: open.item.name, arguments: open.item.arguments }));
    }
    out.push(this.event("response.output_item.done", { output_index: open.outputIndex, item: open.item }));
  }

  private event(type: string, fields: Record<string, unknown>): ResponsesStreamEvent {
    return { type, sequence_number: this.seq++, ...fields };
  }

  private protocol(reason: string): BackendProtocolError {
    return new BackendProtocolError(this.upstream.backend, this.upstream.url, reason);
  }

  /** The `error` event reporting a failure after the stream began (next sequence number). */
  errorEvent(err: unknown): ResponsesStreamEvent {
    const { status, body } = toOpenAiError(err instanceof UpstreamStreamError ? new BackendProtocolError(this.upstream.backend, this.upstream.url, `failed mid-stream: ${err.message}`) : err);
    const { message, type, param } = body.error;
    const code = body.error.code ?? type;
    // Top-level fields are the documented ResponseErrorEvent; the nested `error` makes the openai
    // SDK's stream reader raise an APIError instead of passing the event on as data.
    return this.event("error", { code, message, param, error: { type, code, message, param, status } });
  }
}

function idCore(id: string | undefined): string {
  return (id ?? "").replace(/^(chatcmpl-|resp_)/, "").replace(/[^A-Za-z0-9_-]/g, "");
}

/** Format one event as an SSE frame: `event: <type>\ndata: <json>\n\n`. */
export function formatResponsesSse(event: ResponsesStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** The Responses surface of one streamed answer. */
export function responsesStreamSurface(echo: ResponsesEcho, createdAt: number, fallbackId: string, upstream: UpstreamRef): StreamSurface {
  const conv = new ChatChunkToResponseEvents(echo, createdAt, fallbackId, upstream);
  const frames = (events: ResponsesStreamEvent[]): string => events.map(formatResponsesSse).join("");
  return {
    chunk: (visible) => frames(conv.push(visible as ChatChunkLike)),
    finish: () => frames(conv.finish()),
    fail: (err) => formatResponsesSse(conv.errorEvent(err)),
    errorResponse: (err) => toOpenAiError(err),
    upstreamErrorBody: (_status, json) => json,
  };
}
