// A model's own chat template (the Jinja text of GGUF `tokenizer.chat_template` or HF `tokenizer_config.json`
// `chat_template`) as a ChatFormat, rendered with @huggingface/jinja (as jinja-library.ts loads it) the way
// transformers' `apply_chat_template` calls it: `messages` in OpenAI/HF shape (tool call arguments as parsed
// JSON objects), `tools` in OpenAI shape (absent when none), `add_generation_prompt`, `bos_token`, `eos_token`,
// `raise_exception` and `strftime_now`. The ids are the rendered text tokenized with special tokens recognised
// and no BOS added: HF templates write `bos_token` themselves.
import type { Clock } from "../core/clock.js";
import { realClock } from "../core/real-clock.js";
import type { ChatMessage } from "../core/types.js";
import { ChatTemplateError, type ChatFormat, type ChatRenderOptions } from "./chat-format.js";
import type { ChatToolSpec } from "./chat-template.js";
import { Environment, Interpreter, Template } from "./jinja-library.js";
import type { ModelTokenizer } from "./tokenizer.js";

export interface JinjaChatFormatOptions {
  /** The Jinja source. */
  template: string;
  /** Where the template came from (file path), named in every error. */
  source: string;
  tokenizer: ModelTokenizer;
  /** `bos_token` / `eos_token` text (default: the tokenizer's BOS/EOS piece, "" when it has none). */
  bosToken?: string;
  eosToken?: string;
  /** Time for `strftime_now` (default: the real clock). */
  clock?: Clock;
}

/** A conversation message as HF chat templates read it. */
export type TemplateMessage = Record<string, unknown>;

/** A Jinja chat template; see the file header. Throws {@link ChatTemplateError} on a template that does not parse. */
export class JinjaChatFormat implements ChatFormat {
  readonly name: string;
  private readonly template: Template;
  private readonly bosToken: string;
  private readonly eosToken: string;
  private readonly clock: Clock;

  constructor(private readonly opts: JinjaChatFormatOptions) {
    this.name = `jinja:${opts.source}`;
    try {
      this.template = new Template(opts.template);
    } catch (err) {
      throw new ChatTemplateError(opts.source, `does not parse: ${(err as Error).message}`);
    }
    const tok = opts.tokenizer;
    this.bosToken = opts.bosToken ?? (tok.bosId !== undefined ? tok.tokenText(tok.bosId) : "");
    this.eosToken = opts.eosToken ?? (tok.eosId !== undefined ? tok.tokenText(tok.eosId) : "");
    this.clock = opts.clock ?? realClock;
  }

  renderText(messages: readonly ChatMessage[], opts: ChatRenderOptions): string {
    const vars: Record<string, unknown> = {
      messages: messages.map(templateMessage),
      add_generation_prompt: opts.addGenerationPrompt,
      bos_token: this.bosToken,
      eos_token: this.eosToken,
    };
    if (opts.tools && opts.tools.length > 0) vars.tools = opts.tools.map(templateTool);
    try {
      // Template.render's own steps, with transformers' raise_exception and a clocked strftime_now
      // in place of the library's globals (which it does not let a caller replace).
      const env = new Environment();
      const globals: Record<string, unknown> = {
        false: false,
        true: true,
        none: null,
        False: false,
        True: true,
        None: null,
        range,
        raise_exception: (message: unknown) => {
          throw new ChatTemplateError(this.opts.source, `raise_exception: ${String(message)}`);
        },
        strftime_now: (format: unknown) => strftime(String(format), new Date(this.clock.now())),
      };
      for (const [k, v] of Object.entries({ ...globals, ...vars })) env.set(k, v);
      const out = new Interpreter(env).run(this.template.parsed);
      const text = String(out.value);
      return opts.continueFinalMessage === true ? this.cutAfterFinalMessage(text, messages) : text;
    } catch (err) {
      if (err instanceof ChatTemplateError) throw err;
      throw new ChatTemplateError(this.opts.source, `fails to render: ${(err as Error).message}`);
    }
  }

  /**
   * The render cut right after the final message's content, as transformers' apply_chat_template does
   * with continue_final_message (and so vLLM): the last occurrence of the stripped content; the
   * content's trailing whitespace kept only where the template kept it.
   */
  private cutAfterFinalMessage(text: string, messages: readonly ChatMessage[]): string {
    const content = messages.at(-1)?.content ?? "";
    const stripped = content.trim();
    // No text to cut after (a thinking-only prefill): the render as it is, as transformers' rindex("") leaves it.
    if (stripped === "") return text;
    const at = text.lastIndexOf(stripped);
    if (at < 0) {
      throw new ChatTemplateError(this.opts.source, "continue_final_message: the final message does not appear in the render (the template drops or rewrites it)");
    }
    const kept = text.slice(at, at + content.trimStart().length) === content.trimStart();
    return text.slice(0, at + (kept ? content.trimStart().length : stripped.length));
  }

  render(messages: readonly ChatMessage[], opts: ChatRenderOptions): number[] {
    return this.opts.tokenizer.encode(this.renderText(messages, opts), { special: true });
  }
}

/** One message in OpenAI/HF shape: tool call arguments parsed (HF templates `tojson` them). */
export function templateMessage(m: ChatMessage): TemplateMessage {
  const out: TemplateMessage = { role: m.role, content: m.content };
  if (m.name !== undefined) out.name = m.name;
  if (m.toolCalls && m.toolCalls.length > 0) {
    out.tool_calls = m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: parseArguments(c.arguments) } }));
  }
  if (m.toolCallId !== undefined) out.tool_call_id = m.toolCallId;
  if (m.reasoning !== undefined) out.reasoning_content = m.reasoning;
  return out;
}

/** A declared tool in OpenAI shape, with the fields the request gave (templates test for what is defined). */
export function templateTool(t: ChatToolSpec): Record<string, unknown> {
  const fn: Record<string, unknown> = { name: t.name };
  if (t.description !== undefined) fn.description = t.description;
  if (t.parameters !== undefined) fn.parameters = t.parameters;
  return { type: "function", function: fn };
}

/** Arguments as a JSON value when they parse (templates `tojson` them), else the text as written. */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Jinja's `range` (Python's). */
function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (step === 0) throw new Error("range() step must not be zero");
  const out: number[] = [];
  if (step > 0) for (let i = start; i < stop; i += step) out.push(i);
  else for (let i = start; i > stop; i += step) out.push(i);
  return out;
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/** Python's `datetime.strftime` for the directives chat templates use (UTC). */
export function strftime(format: string, d: Date): string {
  const pad = (n: number, w = 2): string => String(n).padStart(w, "0");
  return format.replace(/%([a-zA-Z%])/g, (all, c: string) => {
    switch (c) {
      case "d":
        return pad(d.getUTCDate());
      case "m":
        return pad(d.getUTCMonth() + 1);
      case "Y":
        return String(d.getUTCFullYear());
      case "y":
        return pad(d.getUTCFullYear() % 100);
      case "b":
        return (MONTHS[d.getUTCMonth()] as string).slice(0, 3);
      case "B":
        return MONTHS[d.getUTCMonth()] as string;
      case "a":
        return (DAYS[d.getUTCDay()] as string).slice(0, 3);
      case "A":
        return DAYS[d.getUTCDay()] as string;
      case "H":
        return pad(d.getUTCHours());
      case "M":
        return pad(d.getUTCMinutes());
      case "S":
        return pad(d.getUTCSeconds());
      case "j": {
        const start = Date.UTC(d.getUTCFullYear(), 0, 1);
        return pad(Math.floor((d.getTime() - start) / 86_400_000) + 1, 3);
      }
      case "%":
        return "%";
      default:
        return all;
    }
  });
}
