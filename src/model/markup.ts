// The text markup for tool calls that the tiny policy emits: two control tokens around
// "<tool name> <argument text>". Capable models use native OpenAI tool calls instead (define-agent.ts,
// toolMode "native"; the built-in engine maps this markup to `tool_calls` when a request declares tools).

export const TOOL_CALL_OPEN = "<|tool_call|>";
export const TOOL_CALL_CLOSE = "<|/tool_call|>";

export interface ParsedToolCall {
  name: string;
  input: string;
}

/** Render one tool call in the markup. */
export function formatToolCall(name: string, input: string): string {
  if (!/^[A-Za-z_][\w-]*$/.test(name)) throw new Error(`invalid tool name '${name}'`);
  return `${TOOL_CALL_OPEN}${name} ${input}${TOOL_CALL_CLOSE}`;
}

/**
 * Find the tool calls in an assistant message. A call opened but never closed (the model ran out
 * of tokens) is reported in `malformed`, as is a call with no tool name.
 */
export function parseToolCalls(text: string): { calls: ParsedToolCall[]; malformed: string[]; rest: string } {
  const calls: ParsedToolCall[] = [];
  const malformed: string[] = [];
  let rest = "";
  let pos = 0;
  for (;;) {
    const open = text.indexOf(TOOL_CALL_OPEN, pos);
    if (open < 0) {
      rest += text.slice(pos);
      break;
    }
    rest += text.slice(pos, open);
    const bodyStart = open + TOOL_CALL_OPEN.length;
    const close = text.indexOf(TOOL_CALL_CLOSE, bodyStart);
    if (close < 0) {
      malformed.push(text.slice(open));
      break;
    }
    const body = text.slice(bodyStart, close);
    const m = /^\s*([A-Za-z_][\w-]*)(?:\s([\s\S]*))?$/.exec(body);
    if (m) calls.push({ name: m[1] as string, input: (m[2] ?? "").trim() });
    else malformed.push(text.slice(open, close + TOOL_CALL_CLOSE.length));
    pos = close + TOOL_CALL_CLOSE.length;
  }
  return { calls, malformed, rest: rest.trim() };
}
