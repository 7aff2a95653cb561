// Tests of the build's copy of @huggingface/jinja (scripts/lower-jinja.mjs): its class fields lowered, every
// template fixture rendered exactly as the package renders it, the same errors, and the package itself loaded when
// running from the sources.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as pkg from "@huggingface/jinja";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jinjaPackageEntry, lowerClassFields, writeLoweredJinja } from "../../scripts/lower-jinja.mjs";
import { LLAMA31_LIKE_TEMPLATE, QWEN25_LIKE_TEMPLATE, QWEN3_LIKE_TEMPLATE } from "../testing/chat-template-fixtures.js";
import { ARBOR_CHAT_TEMPLATE } from "./hf/arbor-jinja-template.js";
import { jinjaLibrarySource, Template } from "./jinja-library.js";
import { CHATML_TOOLS_TEMPLATE, LLAMA3_TOOLS_TEMPLATE } from "./made/templates.js";

/** Most of what chat templates use: loops and their variables, namespaces, slices, macros, filters, tests, string and dict methods. */
const FEATURES_TEMPLATE = String.raw`{%- set ns = namespace(last_user=-1, n=0) -%}
{%- for m in messages[::-1] -%}{%- if ns.last_user < 0 and m.role == 'user' -%}{%- set ns.last_user = messages|length - 1 - loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- macro show(m, i) -%}[{{ i }}:{{ m.role|upper }}:{{ (m.content or '')|trim|replace('a', 'A') }}]{%- endmacro -%}
{%- for m in messages -%}
{%- set ns.n = ns.n + 1 -%}
{{ show(m, loop.index) }}{% if loop.first %}(first){% elif loop.last %}(last){% endif %}
{%- if m.tool_calls is defined and m.tool_calls -%}{%- for c in m.tool_calls -%}<{{ c.function.name }} {{ c.function.arguments|tojson }}>{%- endfor -%}{%- endif -%}
{%- if m.reasoning_content is defined and loop.index0 > ns.last_user -%}<think>{{ m.reasoning_content.split('\n')|join(' / ') }}</think>{%- endif -%}
{%- if m.content is string and m.content.startswith('q') -%}!{%- endif -%}
{%- endfor -%}
{%- if tools is defined and tools -%}{%- for t in tools -%}{{ t.function.name }}={{ t.function.parameters|default({})|tojson }};{%- endfor -%}{%- endif -%}
{{ ns.n }}/{{ ns.last_user }}{% if add_generation_prompt %}>>{% endif %}{{ {'a': 1, 'b': [2, 3]}.items()|list|length }}`;

const TEMPLATES: Record<string, string> = {
  arbor: ARBOR_CHAT_TEMPLATE,
  chatml: CHATML_TOOLS_TEMPLATE,
  llama3: LLAMA3_TOOLS_TEMPLATE,
  qwen25: QWEN25_LIKE_TEMPLATE,
  qwen3: QWEN3_LIKE_TEMPLATE,
  llama31: LLAMA31_LIKE_TEMPLATE,
  features: FEATURES_TEMPLATE,
};

const TOOLS = [
  { type: "function", function: { name: "add", description: "Add two numbers.", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } } },
  { type: "function", function: { name: "search", parameters: { type: "object", properties: { q: { type: "string" } } } } },
];

const CONVERSATIONS: { messages: Record<string, unknown>[]; tools?: unknown[] }[] = [
  { messages: [{ role: "user", content: "what is 2 + 3?" }] },
  {
    messages: [
      { role: "system", content: "You are a calculator.\nAnswer briefly." },
      { role: "user", content: "q: 2 + 3" },
      { role: "assistant", content: "5" },
      { role: "user", content: "and times 4?" },
    ],
  },
  {
    messages: [
      { role: "system", content: "Use tools." },
      { role: "user", content: "add 2 and 3" },
      { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "add", arguments: { a: 2, b: 3 } } }], reasoning_content: "I should call add.\nThen answer." },
      { role: "tool", content: "5", tool_call_id: "c1" },
      { role: "assistant", content: "It is 5.", reasoning_content: "The tool said 5." },
      { role: "user", content: "search for cats, then add 1 and 1" },
      {
        role: "assistant",
        content: "Doing both.",
        tool_calls: [
          { id: "c2", type: "function", function: { name: "search", arguments: { q: "cats" } } },
          { id: "c3", type: "function", function: { name: "add", arguments: { a: 1, b: 1 } } },
        ],
      },
      { role: "tool", content: "cats are mammals", tool_call_id: "c2" },
      { role: "tool", content: "2", tool_call_id: "c3" },
    ],
    tools: TOOLS,
  },
  { messages: [{ role: "assistant", content: "a reply first" }, { role: "user", content: "" }], tools: [] },
];

type Render = (template: string, vars: Record<string, unknown>) => string;

/** The rendered text, or the error's message (both copies must fail the same way). */
function outcome(render: Render, template: string, vars: Record<string, unknown>): string {
  try {
    return render(template, vars);
  } catch (e) {
    return `error: ${(e as Error).message}`;
  }
}

describe("the build's copy of @huggingface/jinja (scripts/lower-jinja.mjs)", () => {
  let dir: string;
  let lowered: typeof pkg;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-jinja-"));
    const file = join(dir, "huggingface-jinja.js");
    writeLoweredJinja(file);
    lowered = (await import(pathToFileURL(file).href)) as typeof pkg;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is the package's code with its class fields as assignments", () => {
    const source = readFileSync(jinjaPackageEntry(), "utf8");
    expect(source).toMatch(/^\s+type = "StringValue";$/m);
    const code = readFileSync(join(dir, "huggingface-jinja.js"), "utf8");
    expect(code).toMatch(/^\/\/ Generated by scripts\/lower-jinja\.mjs from @huggingface\/jinja\//);
    expect(code).toMatch(/this\.type = "StringValue";/);
    expect(code).not.toMatch(/^\s+type = "StringValue";$/m);
    expect(lowerClassFields("class A { x = 1; y; }\nexport { A };")).toMatch(/this\.x = 1;/);
  });

  it("renders every template fixture exactly as the package does", () => {
    const renderWith =
      (lib: typeof pkg): Render =>
      (template, vars) =>
        new lib.Template(template).render(vars);
    let compared = 0;
    for (const [name, template] of Object.entries(TEMPLATES)) {
      for (const [k, c] of CONVERSATIONS.entries()) {
        for (const addGenerationPrompt of [true, false]) {
          const vars: Record<string, unknown> = { messages: c.messages, add_generation_prompt: addGenerationPrompt, bos_token: "<s>", eos_token: "</s>" };
          if (c.tools !== undefined) vars.tools = c.tools;
          const want = outcome(renderWith(pkg), template, vars);
          expect(outcome(renderWith(lowered), template, vars), `${name}, conversation ${k}, add_generation_prompt ${addGenerationPrompt}`).toBe(want);
          if (!want.startsWith("error: ")) compared++;
        }
      }
    }
    // The fixtures render (a comparison of two errors alone would prove little).
    expect(compared).toBeGreaterThan(40);
  });

  it("fails on a bad template with the package's message", () => {
    for (const bad of ["{% for m in messages %}", "{{ messages[0].content | nosuchfilter }}", "{{ raise_exception('no system message') }}"]) {
      const vars = { messages: [{ role: "user", content: "hi" }] };
      expect(outcome((t, v) => new lowered.Template(t).render(v), bad, vars)).toBe(outcome((t, v) => new pkg.Template(t).render(v), bad, vars));
    }
  });

  it("is not there when running from the sources: the package is loaded", () => {
    expect(jinjaLibrarySource).toBe("package");
    expect(new Template("{{ 1 + 2 }}").render({})).toBe("3");
  });
});
