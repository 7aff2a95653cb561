// vLLM's `/tokenize` and `/detokenize`: a text prompt or chat messages → token ids (exactly the
// ids the completion endpoints would feed the model), and token ids → text. They use the served
// model's tokenizer and chat template, which the engine holds apart from the executor, so they work
// while asleep.
// Chat takes vLLM's `tools` and, as an Arbor extension, `tool_choice`: the ids are what
// /v1/chat/completions renders for the same request, a forced tool call's opening included.
import type { FastifyInstance } from "fastify";
import { z } from "../../core/zod.js";
import { promptEnding, renderChatPrompt, type ChatParsers } from "../chat-prompt.js";
import { fromZodError, invalidRequest } from "../openai-errors.js";
import { ChatCompletionRequestSchema, ChatMessageSchema, ChatToolsSchema, toChatMessages } from "../openai-schemas.js";
import type { ServedModel } from "../served-model.js";
import { checkChatPromptFits } from "./request-limits.js";

const TokenizeCompletionSchema = z.object({
  model: z.string().nullish(),
  prompt: z.string({ error: "must be a string" }),
  /** vLLM default true: `<s>` first, as /v1/completions does for a text prompt. */
  add_special_tokens: z.boolean().nullish(),
  /**
   * llama-server's parse_special: special tokens' text (`<|tool_call|>`, `<tool_call>`) becomes their
   * ids. Default: as the completion endpoints read a text prompt (Hugging Face models: yes; Arbor: no).
   * The gateway tokenizes a forced tool call's opening with it on.
   */
  parse_special: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
});

const TokenizeChatSchema = z.object({
  model: z.string().nullish(),
  messages: z.array(ChatMessageSchema).min(1, { error: "must contain at least one message" }),
  add_generation_prompt: z.boolean().nullish(),
  /** vLLM's: leave the final (assistant) message open, its content continued (chat-prompt.ts promptEnding). */
  continue_final_message: z.boolean().nullish(),
  /** vLLM default false: the chat template already starts with `<s>`; true adds another. */
  add_special_tokens: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
  tools: ChatToolsSchema,
  /** Arbor: with a generation prompt, "required" or a named function appends the forced call's opening. */
  tool_choice: ChatCompletionRequestSchema.shape.tool_choice,
});

const DetokenizeSchema = z.object({
  model: z.string().nullish(),
  tokens: z.array(z.number().int().min(0), { error: "must be an array of token ids (integers >= 0)" }),
});

export interface TokenizeRouteDeps {
  served: ServedModel;
  parsers?: ChatParsers;
  /** Context length of one sequence (`max_model_len`). */
  maxModelLen: () => number;
  /** Throws 404 for a model this engine does not serve. */
  checkModel: (model: string | null | undefined) => void;
}

/** Register POST /tokenize and POST /detokenize. */
export function registerTokenizeRoutes(app: FastifyInstance, deps: TokenizeRouteDeps): void {
  const { served } = deps;
  const tok = served.tokenizer;

  app.post("/tokenize", async (request) => {
    const body = request.body;
    const isChat = typeof body === "object" && body !== null && "messages" in body;
    let tokens: number[];
    let returnStrs: boolean;
    if (isChat) {
      const parsed = TokenizeChatSchema.safeParse(body);
      if (!parsed.success) throw fromZodError(parsed.error);
      const b = parsed.data;
      deps.checkModel(b.model);
      const messages = toChatMessages(b.messages);
      // A prompt that cannot fit is refused before rendering (which would overflow on a huge one).
      checkChatPromptFits(messages, b.tools, deps.maxModelLen(), served.maxTokenChars);
      tokens = renderChatPrompt(messages, b, served, promptEnding(b, messages), deps.parsers).prompt;
      if (b.add_special_tokens === true && tok.addBos && tok.bosId !== undefined) tokens.unshift(tok.bosId);
      returnStrs = b.return_token_strs === true;
    } else {
      const parsed = TokenizeCompletionSchema.safeParse(body);
      if (!parsed.success) throw fromZodError(parsed.error);
      const b = parsed.data;
      deps.checkModel(b.model);
      tokens = tok.encode(b.prompt, { special: b.parse_special ?? served.promptSpecial });
      // As vLLM (HF add_special_tokens): BOS only for a tokenizer that adds one.
      if ((b.add_special_tokens ?? true) && tok.addBos && tok.bosId !== undefined) tokens.unshift(tok.bosId);
      returnStrs = b.return_token_strs === true;
    }
    return {
      count: tokens.length,
      max_model_len: deps.maxModelLen(),
      tokens,
      ...(returnStrs ? { token_strs: tokens.map((id) => tok.tokenText(id)) } : {}),
    };
  });

  app.post("/detokenize", async (request) => {
    const parsed = DetokenizeSchema.safeParse(request.body);
    if (!parsed.success) throw fromZodError(parsed.error);
    deps.checkModel(parsed.data.model);
    const { tokens } = parsed.data;
    const bad = tokens.findIndex((id) => id >= tok.size);
    if (bad >= 0) throw invalidRequest(`tokens[${bad}]`, `token id ${tokens[bad]} is outside the vocabulary (size ${tok.size})`);
    // As vLLM's /detokenize (HF decode): special tokens as their text.
    return { prompt: tok.decode(tokens, { special: true }) };
  });
}
