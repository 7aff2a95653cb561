// Golden conversations → SFT samples: each conversation rendered with the chat template exactly as the
// engine renders a program's prompts, with the loss on the assistant's tokens only (its content and the
// `<|end|>` that stops it). The role marker `<|assistant|>` ends the engine's prompt, so it is context.
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import { renderChat } from "../model/chat-template.js";
import type { Vocab } from "../model/vocab.js";

/** One SFT sequence: token ids and a 0/1 loss mask of the same length. */
export interface SftSample {
  tokenIds: number[];
  lossMask: number[];
}

function startsWith(seq: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= seq.length && prefix.every((t, i) => seq[i] === t);
}

/**
 * Render `messages` as one sequence whose assistant turns carry the loss. Each assistant turn's prompt
 * (everything before it plus `<|assistant|>`) is checked to be a prefix of the whole rendering, so the
 * sample is exactly what the engine sees call after call. Throws an ArborError when it is not (a chat
 * template whose renderings of successive turns do not extend each other).
 */
export function goldenSample(messages: readonly ChatMessage[], vocab: Vocab): SftSample {
  const tokenize = (t: string): number[] => vocab.encode(t);
  const tokenIds = renderChat(messages, tokenize, vocab, { addGenerationPrompt: false });
  const lossMask = new Array<number>(tokenIds.length).fill(0);
  messages.forEach((m, i) => {
    if (m.role !== "assistant") return;
    const prompt = renderChat(messages.slice(0, i), tokenize, vocab, { addGenerationPrompt: true });
    const through = renderChat(messages.slice(0, i + 1), tokenize, vocab, { addGenerationPrompt: false });
    if (!startsWith(tokenIds, prompt) || !startsWith(tokenIds, through)) {
      throw new ArborError(`sft: assistant turn ${i} does not render as a prefix of the whole conversation`, "sft");
    }
    for (let k = prompt.length; k < through.length; k++) lossMask[k] = 1;
  });
  if (!lossMask.includes(1)) throw new ArborError("sft: the conversation has no assistant turn to learn from", "sft");
  return { tokenIds, lossMask };
}
