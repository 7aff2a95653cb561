// One chat completion through the official `openai` client, streamed or not, as the message a
// client ends up with: the stream helper's final message plus the reasoning deltas added up (the
// helper keeps only the last `reasoning_content` delta, so a client has to add them itself).
import type OpenAI from "openai";

export type ReasonedMessage = OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };

/** Ask `client` for `body`'s completion (streamed when `stream`); its first choice's message and finish reason. */
export async function chatAnswerOf(
  client: OpenAI,
  body: OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming,
  stream: boolean,
): Promise<{ message: ReasonedMessage; finish: string | undefined }> {
  if (!stream) {
    const res = await client.chat.completions.create(body);
    return { message: res.choices[0]!.message as ReasonedMessage, finish: res.choices[0]!.finish_reason };
  }
  let reasoning = "";
  const s = client.chat.completions.stream({ ...body, stream: true });
  s.on("chunk", (c) => void (reasoning += (c.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ""));
  const done = await s.finalChatCompletion();
  return { message: { ...done.choices[0]!.message, reasoning_content: reasoning }, finish: done.choices[0]!.finish_reason };
}
