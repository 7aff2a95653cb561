// Arbor's chat template (src/model/chat-template.ts) written as a Hugging Face Jinja chat template, for
// the tokenizer_config.json of an exported tiny policy: transformers' `apply_chat_template`, vLLM and
// llama.cpp render with it the text whose pieces are exactly the ones `renderChat` emits (the tests
// check it with @huggingface/jinja). One difference is inherent to any text template: the tool
// instructions mention the `<|tool_call|>` markers, which `renderChat` tokenizes as plain text while a
// tokenizer that parses special tokens in the rendered text reads them as the control tokens.

/** The Jinja rendition of Arbor's chat template. Tools may be OpenAI `{type, function}` objects or flat. */
export const ARBOR_CHAT_TEMPLATE = [
  "{{- bos_token }}",
  "{%- if tools %}",
  "{{- '<|system|>You can call these tools:' }}",
  "{%- for tool in tools %}",
  "{%- set fn = tool.function if tool.function is defined else tool %}",
  "{{- '\\n- ' + fn.name }}",
  "{%- if fn.description %}{{- ': ' + fn.description }}{%- endif %}",
  "{{- '\\n  arguments: ' }}",
  "{%- if fn.parameters is defined and fn.parameters is not none %}{{- fn.parameters | tojson(separators=(',', ':')) }}",
  "{%- else %}{{- '{\"type\":\"object\",\"properties\":{}}' }}{%- endif %}",
  "{%- endfor %}",
  "{{- '\\nTo call a tool, write <|tool_call|>, the tool name, a space, its arguments as one JSON object, then <|/tool_call|>.<|end|>' }}",
  "{%- endif %}",
  "{%- for message in messages %}",
  "{%- if message.role not in ['system', 'user', 'assistant', 'tool'] %}{{- raise_exception('unknown role ' + message.role) }}{%- endif %}",
  "{{- '<|' + message.role + '|>' + message.content + '<|end|>' }}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}",
].join("\n");

/** Whether a GGUF vocabulary is Arbor's own (its chat markers are control tokens), i.e. the template above applies. */
export function isArborVocabulary(tokens: readonly string[], types: readonly number[]): boolean {
  const markers = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>", "<|tool_call|>", "<|/tool_call|>"];
  return markers.every((m) => {
    const i = tokens.indexOf(m);
    return i >= 0 && types[i] === 3;
  });
}
