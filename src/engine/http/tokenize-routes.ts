// vLLM's `/tokenize` and `/detokenize`: a text prompt or chat messages → token ids (exactly the
// ids the completion endpoints would feed the model), and token ids → text. They use Arbor's
// vocabulary directly (the engine checks at load that the GGUF uses it), so they work while asleep.
// Chat takes vLLM's `tools` and, as an Arbor extension, `tool_choice`: the ids are what
// /v1/chat/completions renders for the same request, a forced tool call's opening included.
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { CONTROL_TOKENS, type Vocab } from "../../model/vocab.js";
import { fromZodError, invalidRequest } from "../openai-errors.js";
import { ChatCompletionRequestSchema, ChatMessageSchema, ChatToolsSchema, toChatMessages } from "../openai-schemas.js";
import { renderChatPrompt } from "../openai-tools.js";
import { checkChatPromptFits } from "./request-limits.js";

const TokenizeCompletionSchema = z.object({
  model: z.string().nullish(),
  prompt: z.string({ error: "must be a string" }),
  /** vLLM default true: `<s>` first, as /v1/completions does for a text prompt. */
  add_special_tokens: z.boolean().nullish(),
  /** llama-server's parse_special: control tokens' text (`<|tool_call|>`) becomes their ids (default false: plain text). */
  parse_special: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
});

/** Text with the control tokens' text read as their ids, the rest as plain text (llama.cpp's parse_special). */
function encodeParsingSpecial(vocab: Vocab, text: string): number[] {
  const ids: number[] = [];
  let at = 0;
  for (;;) {
    let next = -1;
    let marker = "";
    for (const m of CONTROL_TOKENS) {
      const i = text.indexOf(m, at);
      if (i >= 0 && (next < 0 || i < next)) [next, marker] = [i, m];
    }
    const plain = text.slice(at, next < 0 ? text.length : next);
    if (plain !== "") ids.push(...vocab.encode(plain));
    if (next < 0) return ids;
    ids.push(vocab.controlId(marker));
    at = next + marker.length;
  }
}

const TokenizeChatSchema = z.object({
  model: z.string().nullish(),
  messages: z.array(ChatMessageSchema).min(1, { error: "must contain at least one message" }),
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.literal(false, { error: "continue_final_message is not supported (must be false)" }).nullish(),
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
  vocab: Vocab;
  /** Context length of one sequence (`max_model_len`). */
  maxModelLen: () => number;
  /** Throws 404 for a model this engine does not serve. */
  checkModel: (model: string | null | undefined) => void;
}

/** Register POST /tokenize and POST /detokenize. */
export function registerTokenizeRoutes(app: FastifyInstance, deps: TokenizeRouteDeps): void {
  const { vocab } = deps;

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
      checkChatPromptFits(messages, b.tools, deps.maxModelLen());
      tokens = renderChatPrompt(messages, b, (t) => vocab.encode(t), vocab, b.add_generation_prompt ?? true).prompt;
      if (b.add_special_tokens === true) tokens.unshift(vocab.bosId);
      returnStrs = b.return_token_strs === true;
    } else {
      const parsed = TokenizeCompletionSchema.safeParse(body);
      if (!parsed.success) throw fromZodError(parsed.error);
      const b = parsed.data;
      deps.checkModel(b.model);
      tokens = b.parse_special === true ? encodeParsingSpecial(vocab, b.prompt) : vocab.encode(b.prompt);
      if (b.add_special_tokens ?? true) tokens.unshift(vocab.bosId);
      returnStrs = b.return_token_strs === true;
    }
    return {
      count: tokens.length,
      max_model_len: deps.maxModelLen(),
      tokens,
      ...(returnStrs ? { token_strs: tokens.map((id) => vocab.tokenText(id)) } : {}),
    };
  });

  app.post("/detokenize", async (request) => {
    const parsed = DetokenizeSchema.safeParse(request.body);
    if (!parsed.success) throw fromZodError(parsed.error);
    deps.checkModel(parsed.data.model);
    const { tokens } = parsed.data;
    const bad = tokens.findIndex((id) => id >= vocab.size);
    if (bad >= 0) throw invalidRequest(`tokens[${bad}]`, `token id ${tokens[bad]} is outside the vocabulary (size ${vocab.size})`);
    return { prompt: vocab.decode(tokens) };
  });
}
