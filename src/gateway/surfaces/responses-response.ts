// Translates an OpenAI chat.completion (what the backends answer) into a Responses API `Response`:
// the reasoning (reasoning_content, the backend's reasoning parser) becomes a reasoning item before the
// rest, in vLLM's shape (summary [], the text as one reasoning_text part), text becomes a message item,
// tool_calls become function_call items, finish_reason "length" marks
// the response incomplete, usage is renamed (completion_tokens_details.reasoning_tokens becomes
// output_tokens_details.reasoning_tokens). The SDKs compute `output_text` themselves.
import { BackendProtocolError } from "../../backends/backend.js";
import type { ChatCompletionLike } from "./anthropic-response.js";
import type { ResponsesEcho } from "./responses-request.js";

export interface ResponseOutputMessage {
  type: "message";
  id: string;
  role: "assistant";
  status: "completed" | "incomplete";
  content: { type: "output_text"; text: string; annotations: never[] }[];
}

/** The policy's reasoning, as vLLM's Responses API returns it (no summary: the gateway writes none). */
export interface ResponseReasoningItem {
  type: "reasoning";
  id: string;
  summary: never[];
  content: { type: "reasoning_text"; text: string }[];
  status: "completed" | "incomplete";
}

export interface ResponseFunctionCall {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: "completed";
}

/** The Response object, in the fields the OpenAI SDKs read. */
export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: "completed" | "incomplete";
  error: null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  model: string;
  output: (ResponseReasoningItem | ResponseOutputMessage | ResponseFunctionCall)[];
  usage: {
    input_tokens: number;
    input_tokens_details: { cached_tokens: number };
    output_tokens: number;
    output_tokens_details: { reasoning_tokens: number };
    total_tokens: number;
  };
  instructions: string | null;
  metadata: Record<string, string>;
  temperature: number | null;
  top_p: number | null;
  max_output_tokens: number | null;
  tool_choice: ResponsesEcho["tool_choice"];
  tools: ResponsesEcho["tools"];
  parallel_tool_calls: boolean;
}

/** Where the answer came from, for errors that blame the upstream. */
export interface UpstreamRef {
  backend: string;
  url: string;
}

/**
 * Translate a chat.completion into a Response answering the request summarised by `echo`.
 * `createdAt` is unix seconds; `fallbackId` names the response when the upstream gave no id.
 * Throws {@link BackendProtocolError} (502) when the upstream answer has no choice or an unknown finish_reason.
 */
export function chatToResponse(chat: ChatCompletionLike, echo: ResponsesEcho, createdAt: number, fallbackId: string, upstream: UpstreamRef): ResponseObject {
  const choice = chat.choices[0];
  if (!choice) throw new BackendProtocolError(upstream.backend, upstream.url, "answered a chat completion with no choices");
  const incomplete = incompleteReason(choice.finish_reason, upstream);
  const core = idCore(chat.id) || idCore(fallbackId) || "0";
  const output: ResponseObject["output"] = [];
  const reasoning = choice.message.reasoning_content;
  const text = choice.message.content;
  if (typeof reasoning === "string" && reasoning !== "") {
    // Cut off only when nothing came after it (a length stop inside the reasoning), as the stream
    // marks the one item still open when the answer ended.
    const last = !(typeof text === "string" && text !== "") && (choice.message.tool_calls ?? []).length === 0;
    output.push({ type: "reasoning", id: `rs_${core}`, summary: [], content: [{ type: "reasoning_text", text: reasoning }], status: incomplete && last ? "incomplete" : "completed" });
  }
  if (typeof text === "string" && text !== "") {
    output.push({
      type: "message",
      id: `msg_${core}`,
      role: "assistant",
      status: incomplete ? "incomplete" : "completed",
      content: [{ type: "output_text", text, annotations: [] }],
    });
  }
  (choice.message.tool_calls ?? []).forEach((tc, i) => {
    output.push({
      type: "function_call",
      id: `fc_${core}_${i}`,
      call_id: tc.id && tc.id !== "" ? tc.id : `call_${core}_${i}`,
      name: tc.function.name,
      arguments: tc.function.arguments,
      status: "completed",
    });
  });
  const input = chat.usage?.prompt_tokens ?? 0;
  const out = chat.usage?.completion_tokens ?? 0;
  return {
    id: `resp_${core}`,
    object: "response",
    created_at: createdAt,
    status: incomplete ? "incomplete" : "completed",
    error: null,
    incomplete_details: incomplete ? { reason: incomplete } : null,
    model: echo.model,
    output,
    usage: {
      input_tokens: input,
      input_tokens_details: { cached_tokens: chat.usage?.prompt_tokens_details?.cached_tokens ?? 0 },
      output_tokens: out,
      // Counted on the output ids where the gateway generated the answer with a reasoning parser
      // (token path); relayed from an engine that reports it; 0 where neither knows (a passthrough
      // answer whose engine reports none: the split in token ids is not the gateway's to see).
      output_tokens_details: { reasoning_tokens: chat.usage?.completion_tokens_details?.reasoning_tokens ?? 0 },
      total_tokens: input + out,
    },
    instructions: echo.instructions,
    metadata: echo.metadata,
    temperature: echo.temperature,
    top_p: echo.top_p,
    max_output_tokens: echo.max_output_tokens,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    parallel_tool_calls: echo.parallel_tool_calls,
  };
}

function incompleteReason(finishReason: string | null, upstream: UpstreamRef): "max_output_tokens" | "content_filter" | null {
  switch (finishReason) {
    case "stop":
    case "tool_calls":
    case "function_call":
      return null;
    case "length":
      return "max_output_tokens";
    case "content_filter":
      return "content_filter";
    default:
      throw new BackendProtocolError(upstream.backend, upstream.url, `answered finish_reason ${JSON.stringify(finishReason)}, not one of stop, length, tool_calls, content_filter`);
  }
}

function idCore(id: string | undefined): string {
  return (id ?? "").replace(/^chatcmpl-/, "").replace(/[^A-Za-z0-9_-]/g, "");
}
