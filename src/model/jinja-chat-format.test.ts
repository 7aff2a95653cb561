import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborChatFormat } from "./arbor-chat-format.js";
import { ChatTemplateError } from "./chat-format.js";
import { renderChat } from "./chat-template.js";
import { JinjaChatFormat, strftime } from "./jinja-chat-format.js";
import { CHATML_TOOLS_TEMPLATE } from "./made/templates.js";
import { Vocab } from "./vocab.js";

const vocab = new Vocab();
const tokenizer = vocab;

function jinja(template: string, clock?: VirtualClock): JinjaChatFormat {
  return new JinjaChatFormat({ template, source: "t.jinja", tokenizer, ...(clock ? { clock } : {}) });
}

describe("JinjaChatFormat", () => {
  it("passes messages, tools and the flags the way apply_chat_template does", () => {
    const f = jinja(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}|{{ m.content }}|{{ m.tool_calls | tojson }}|{{ m.tool_call_id }}|{{ m.reasoning_content }}]{% endfor %}" +
        "{% if tools is defined %}{{ tools | tojson }}{% else %}no-tools{% endif %}{% if add_generation_prompt %}<gen>{% endif %}{{ eos_token }}",
    );
    const text = f.renderText(
      [
        { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "add", arguments: '{"a": 1}' }], reasoning: "think" },
        { role: "tool", content: "1", toolCallId: "c1" },
      ],
      { addGenerationPrompt: true },
    );
    expect(text).toBe(
      '<s>[assistant||[{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}]||think][tool|1|null|c1|]no-tools<gen></s>',
    );
    const withTools = f.renderText([{ role: "user", content: "hi" }], { addGenerationPrompt: false, tools: [{ name: "add", description: "d" }] });
    expect(withTools).toContain('[{"type": "function", "function": {"name": "add", "description": "d"}}]');
    expect(withTools).not.toContain("<gen>");
  });

  it("tokenizes the rendered text with special tokens on and no extra BOS", () => {
    const f = jinja("{{ bos_token }}{% for m in messages %}<|user|>{{ m.content }}<|end|>{% endfor %}<|assistant|>");
    const ids = f.render([{ role: "user", content: "2+3" }], { addGenerationPrompt: true });
    expect(ids).toEqual(renderChat([{ role: "user", content: "2+3" }], (t) => vocab.encode(t), vocab));
  });

  it("keeps arguments that are not JSON as text", () => {
    const f = jinja("{% for m in messages %}{{ m.tool_calls[0].function.arguments }}{% endfor %}");
    expect(f.renderText([{ role: "assistant", content: "", toolCalls: [{ id: "c", name: "x", arguments: "{not json" }] }], { addGenerationPrompt: false })).toBe("{not json");
  });

  it("names the template and the reason when it does not parse, raises, or fails", () => {
    expect(() => jinja("{% for m in messages %}")).toThrowError(ChatTemplateError);
    expect(() => jinja("{% for m in messages %}")).toThrowError(/^chat template t\.jinja: does not parse: /);
    const raising = jinja("{{ raise_exception('roles must alternate') }}");
    expect(() => raising.renderText([{ role: "user", content: "x" }], { addGenerationPrompt: true })).toThrowError("chat template t.jinja: raise_exception: roles must alternate");
    const failing = jinja("{{ messages[0].content.nosuch() }}");
    expect(() => failing.renderText([{ role: "user", content: "x" }], { addGenerationPrompt: true })).toThrowError(/^chat template t\.jinja: fails to render: /);
  });

  it("gives strftime_now the injected clock's time", () => {
    const clock = new VirtualClock(Date.UTC(2024, 6, 26, 9, 5, 3));
    expect(jinja("{{ strftime_now('%d %b %Y') }}", clock).renderText([], { addGenerationPrompt: false })).toBe("26 Jul 2024");
    expect(strftime("%Y-%m-%dT%H:%M:%S %A %j %%", new Date(Date.UTC(2024, 0, 2, 3, 4, 5)))).toBe("2024-01-02T03:04:05 Tuesday 002 %");
  });

  it("renders the ChatML tools template with range and loop helpers", () => {
    const f = jinja(CHATML_TOOLS_TEMPLATE + "{% for i in range(2) %}{{ i }}{% endfor %}");
    const text = f.renderText(
      [
        { role: "user", content: "hi" },
        { role: "tool", content: "a", toolCallId: "1" },
        { role: "tool", content: "b", toolCallId: "2" },
      ],
      { addGenerationPrompt: true },
    );
    expect(text).toBe("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>user\n<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>\n<|im_start|>assistant\n01");
  });
});

describe("continueFinalMessage", () => {
  const chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  const msgs = [
    { role: "user" as const, content: "What is 2+2?" },
    { role: "assistant" as const, content: "The answer is" },
  ];

  it("Jinja: cuts the render right after the final message's content, as transformers does", () => {
    expect(jinja(chatml).renderText(msgs, { addGenerationPrompt: false, continueFinalMessage: true })).toBe(
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nThe answer is",
    );
    // Trailing whitespace the template trimmed is not put back (transformers cuts after the stripped content).
    expect(jinja(chatml).renderText([msgs[0]!, { role: "assistant", content: "The answer is " }], { addGenerationPrompt: false, continueFinalMessage: true })).toMatch(/The answer is$/);
  });

  it("Jinja: a final message without text (a thinking-only prefill) leaves the render as it is, as transformers does", () => {
    const empty = [msgs[0]!, { role: "assistant" as const, content: "" }];
    expect(jinja(chatml).renderText(empty, { addGenerationPrompt: false, continueFinalMessage: true })).toBe(jinja(chatml).renderText(empty, { addGenerationPrompt: false }));
  });

  it("Jinja: refuses a final message the render does not hold", () => {
    const drops = jinja("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}");
    expect(() => drops.renderText(msgs, { addGenerationPrompt: false, continueFinalMessage: true })).toThrow(ChatTemplateError);
  });

  it("Arbor: the final turn has no <|end|>", () => {
    const f = new ArborChatFormat(vocab);
    const closed = f.render(msgs, { addGenerationPrompt: false });
    expect(f.render(msgs, { addGenerationPrompt: false, continueFinalMessage: true })).toEqual(closed.slice(0, -1));
    expect(closed.at(-1)).toBe(vocab.controlId("<|end|>"));
  });
});

describe("ArborChatFormat", () => {
  it("is renderChat, with assistant tool calls written as the policy's markup", () => {
    const f = new ArborChatFormat(vocab);
    const msgs = [
      { role: "user" as const, content: "add" },
      { role: "assistant" as const, content: "ok", toolCalls: [{ id: "c", name: "add", arguments: '{"a":1}' }] },
    ];
    const markup = [msgs[0]!, { role: "assistant" as const, content: 'ok<|tool_call|>add {"a":1}<|/tool_call|>' }];
    expect(f.render(msgs, { addGenerationPrompt: true, tools: [{ name: "add" }] })).toEqual(renderChat(markup, (t) => vocab.encode(t), vocab, { tools: [{ name: "add" }] }));
  });
});
