// Arbor's chat template for the tiny policy, rendered straight to token ids:
// <s> then, per message, <|role|> content <|end|>; optionally a trailing <|assistant|>.

import type { ChatMessage, ChatRole } from "../core/types.js";
import type { ControlTokenName, Vocab } from "./vocab.js";

/** Tokens that end an assistant turn. */
export const STOP_TOKEN_NAMES = ["</s>", "<|end|>"] as const;

const ROLE_TOKEN: Record<ChatRole, ControlTokenName> = {
  system: "<|system|>",
  user: "<|user|>",
  assistant: "<|assistant|>",
  tool: "<|tool|>",
};

const TOOL_MARKERS: readonly ControlTokenName[] = ["<|tool_call|>", "<|/tool_call|>"];

export interface RenderChatOptions {
  /** Append `<|assistant|>` so the model continues as the assistant (default true). */
  addGenerationPrompt?: boolean;
  /** Leave the final message's turn open (no `<|end|>` after it): the model continues its content. */
  continueFinalMessage?: boolean;
  /** Tools the model may call: rendered by {@link renderToolsPrompt} as a system turn before the messages. */
  tools?: readonly ChatToolSpec[];
}

/** A tool declared to the model (OpenAI's `function` tool, flattened). */
export interface ChatToolSpec {
  name: string;
  description?: string;
  /** JSON Schema of the arguments object. */
  parameters?: Record<string, unknown>;
}

/**
 * The system text that declares tools to the tiny policy, in its own markup: a call is
 * `<|tool_call|>name {json arguments}<|/tool_call|>`. Deterministic (same tools, same text), so
 * a program's prompts keep a stable prefix across calls.
 */
export function renderToolsPrompt(tools: readonly ChatToolSpec[]): string {
  const lines = tools.map((t) => {
    const desc = t.description ? `: ${t.description}` : "";
    return `- ${t.name}${desc}\n  arguments: ${JSON.stringify(t.parameters ?? { type: "object", properties: {} })}`;
  });
  return [
    "You can call these tools:",
    ...lines,
    "To call a tool, write <|tool_call|>, the tool name, a space, its arguments as one JSON object, then <|/tool_call|>.",
  ].join("\n");
}

/** Ids of the tokens that end generation (`</s>`, `<|end|>`). */
export function stopTokenIds(vocab: Vocab): number[] {
  return STOP_TOKEN_NAMES.map((name) => (name === "</s>" ? vocab.eosId : vocab.controlId(name)));
}

/**
 * Render messages to prompt token ids. Content is tokenized as plain text, so no role can inject
 * role markers. One exception keeps token-in/token-out consistent: in assistant messages the
 * tool-call markers `<|tool_call|>` / `<|/tool_call|>` (which the policy itself emits as control
 * tokens and `Vocab.decode` renders as text) are turned back into their control tokens.
 */
export function renderChat(
  messages: readonly ChatMessage[],
  tokenize: (text: string) => number[],
  vocab: Vocab,
  opts: RenderChatOptions = {},
): number[] {
  const ids: number[] = [vocab.bosId];
  const end = vocab.controlId("<|end|>");
  if (opts.tools !== undefined && opts.tools.length > 0) {
    // As plain text: the markers in the instructions must not become control tokens.
    ids.push(vocab.controlId("<|system|>"), ...tokenize(renderToolsPrompt(opts.tools)), end);
  }
  messages.forEach((m, i) => {
    const roleToken = ROLE_TOKEN[m.role];
    if (roleToken === undefined) throw new RangeError(`messages[${i}].role: unknown role '${String(m.role)}'`);
    if (typeof m.content !== "string") throw new TypeError(`messages[${i}].content: must be a string`);
    ids.push(vocab.controlId(roleToken));
    if (m.role === "assistant") pushWithToolMarkers(ids, m.content, tokenize, vocab);
    else ids.push(...tokenize(m.content));
    // A continued final message is the turn the model is still writing: no ending yet.
    if (!(opts.continueFinalMessage === true && i === messages.length - 1)) ids.push(end);
  });
  if (opts.addGenerationPrompt ?? true) ids.push(vocab.controlId("<|assistant|>"));
  return ids;
}

function pushWithToolMarkers(out: number[], text: string, tokenize: (t: string) => number[], vocab: Vocab): void {
  let pos = 0;
  for (;;) {
    let best = -1;
    let marker: ControlTokenName | undefined;
    for (const m of TOOL_MARKERS) {
      const at = text.indexOf(m, pos);
      if (at >= 0 && (best < 0 || at < best)) {
        best = at;
        marker = m;
      }
    }
    if (marker === undefined) {
      if (pos < text.length) out.push(...tokenize(text.slice(pos)));
      return;
    }
    if (best > pos) out.push(...tokenize(text.slice(pos, best)));
    out.push(vocab.controlId(marker));
    pos = best + marker.length;
  }
}
