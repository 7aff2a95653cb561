// Golden conversations → SFT samples: each conversation rendered with the model's chat template exactly
// as the engine renders a program's prompts (declared tools included), with the loss on the assistant's
// tokens only: its content, its tool calls and the token that ends its turn (`<|end|>`, `<|im_end|>`,
// `<|eot_id|>`). What a template writes after that token (ChatML's newline) and the role opening that
// ends the engine's prompt are context: the model never generates them.
import { ArborError } from "../core/errors.js";
import type { ChatMessage } from "../core/types.js";
import type { ChatToolSpec } from "../model/chat-template.js";
import type { ChatFormat } from "../model/chat-format.js";

/** One SFT sequence: token ids and a 0/1 loss mask of the same length. */
export interface SftSample {
  tokenIds: number[];
  lossMask: number[];
}

export interface GoldenRender {
  format: ChatFormat;
  /** Ids that end an assistant turn; the turn's loss ends at the first (absent: the whole rendered turn). */
  stopIds?: readonly number[];
  /** Tools the requests declare (native tool calls): rendered as the engine renders them. */
  tools?: readonly ChatToolSpec[];
}

function startsWith(seq: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= seq.length && prefix.every((t, i) => seq[i] === t);
}

/**
 * Render `messages` as one sequence whose assistant turns carry the loss. Each assistant turn's prompt
 * (everything before it plus the generation prompt) is checked to be a prefix of the whole rendering, so
 * the sample is exactly what the engine sees call after call. Throws an ArborError when it is not (a chat
 * template whose renderings of successive turns do not extend each other).
 */
export function goldenSample(messages: readonly ChatMessage[], r: GoldenRender): SftSample {
  const render = (m: readonly ChatMessage[], addGenerationPrompt: boolean): number[] =>
    r.format.render(m, { addGenerationPrompt, ...(r.tools && r.tools.length > 0 ? { tools: r.tools } : {}) });
  const stops = new Set(r.stopIds ?? []);
  const tokenIds = render(messages, false);
  const lossMask = new Array<number>(tokenIds.length).fill(0);
  messages.forEach((m, i) => {
    if (m.role !== "assistant") return;
    const prompt = render(messages.slice(0, i), true);
    const through = render(messages.slice(0, i + 1), false);
    if (!startsWith(tokenIds, prompt) || !startsWith(tokenIds, through)) {
      throw new ArborError(`sft: assistant turn ${i} does not render as a prefix of the whole conversation (${r.format.name})`, "sft");
    }
    for (let k = prompt.length; k < through.length; k++) {
      lossMask[k] = 1;
      if (stops.has(tokenIds[k] as number)) break;
    }
  });
  if (!lossMask.includes(1)) throw new ArborError("sft: the conversation has no assistant turn to learn from", "sft");
  return { tokenIds, lossMask };
}
