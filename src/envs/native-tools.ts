// An environment's tasks and golden conversations for models that call tools natively (OpenAI
// `tools` in the request, each model's own tool-call format in its output) instead of Arbor's text
// markup: the system prompt without the markup instructions, and golden assistant turns whose
// markup calls become `toolCalls`. Environment tools take one string, which a native call carries
// as its `input` argument (agents/agent-tool.ts wraps string inputs the same way).
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import { parseToolCalls } from "../model/markup.js";
import type { Environment, Task } from "./env.js";

/** The environment's native-tools system prompt; an ArborError naming the environment when it has none. */
function nativePrompt(env: Environment): string {
  if (env.nativeSystemPrompt === undefined) {
    throw new ArborError(`agent.toolMode: native: environment '${env.name}' has no system prompt for native tool calls (markup only)`, "config");
  }
  return env.nativeSystemPrompt;
}

/** `task` with its system turn replaced by the environment's native-tools system prompt. */
export function nativeTask(env: Environment, task: Task): Task {
  const system = nativePrompt(env);
  const prompt = task.prompt.map((m) => (m.role === "system" ? { ...m, content: system } : { ...m }));
  return { ...task, prompt };
}

/**
 * A golden conversation in native form: the system prompt swapped, each assistant turn's markup
 * calls moved to `toolCalls` (arguments `{"input": <markup input>}`, ids `call_<turn>_<n>`), and each
 * tool turn linked to the call it answers. A markup call that does not parse is an ArborError:
 * golden data is never silently changed.
 */
export function nativeConversation(env: Environment, messages: readonly ChatMessage[]): ChatMessage[] {
  const system = nativePrompt(env);
  const out: ChatMessage[] = [];
  const pending: string[] = [];
  messages.forEach((m, i) => {
    if (m.role === "system") out.push({ ...m, content: system });
    else if (m.role === "assistant") {
      const parsed = parseToolCalls(m.content);
      if (parsed.malformed.length > 0) throw new ArborError(`golden conversation turn ${i}: malformed tool call ${JSON.stringify(parsed.malformed[0])}`, "env");
      const toolCalls = parsed.calls.map((c, n) => ({ id: `call_${i}_${n}`, name: c.name, arguments: JSON.stringify({ input: c.input }) }));
      pending.push(...toolCalls.map((c) => c.id));
      out.push(toolCalls.length > 0 ? { role: "assistant", content: parsed.rest, toolCalls } : { ...m });
    } else if (m.role === "tool") {
      const id = pending.shift();
      if (id === undefined) throw new ArborError(`golden conversation turn ${i}: a tool result with no tool call before it`, "env");
      out.push({ ...m, toolCallId: id });
    } else out.push({ ...m });
  });
  return out;
}
