// The fixed text the made-here vocabularies are trained on: English sentences, the calc
// environment's prompts and answers, tool declarations and JSON tool calls in the shapes the made
// templates render. Built-in and deterministic, so the vocabularies (and the GGUFs named by their
// hash) are the same on every machine. Special-token text never appears here: specials are
// separate tokens, and a merge that spelled one would duplicate it.

const SENTENCES = `The quick brown fox jumps over the lazy dog. A small model can still learn the shape of a conversation.
You are a helpful assistant. Answer the question, and use a tool when it helps.
What is the capital of France? The capital of France is Paris.
Please think step by step, then give the final answer on its own line.
The weather today is sunny with a light breeze from the west, and the temperature is about twenty degrees.
I could not find that file. Let me check the directory again and try once more.
Thank you! Is there anything else I can help you with today?
The function returns an integer; if the input is empty, it raises an error that names the field.
Reinforcement learning trains the policy on the rewards of its own rollouts.
Each call records the prompt ids, the output ids and their log probabilities.
The engine serves the model, the gateway records every call, and the trainer updates the weights.
She said that they'd already left, but we're sure he'll come back soon; it's not far and I'm waiting.
Numbers like 3, 42, 100, 2024 and 65536 appear in text; so do prices such as $19.99 and 7%.
Héllo wörld: café, naïve, résumé, jalapeño — and 日本語 text, emoji 😀, and symbols ✓ → ∑.
`;

const SYSTEM_PROMPTS = `You solve arithmetic questions exactly. You have one tool, calc, which evaluates an integer
expression (digits, spaces, + - * / and parentheses; / divides and drops the remainder).
The result comes back in the next message. Then give the final answer on its own line as
Answer: <number>
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within XML tags:
For each function call, return a json object with function name and arguments within XML tags:
{"name": <function-name>, "arguments": <args-json-object>}
Environment: ipython
Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.
`;

const TOOLS_JSON = [
  `{"type": "function", "function": {"name": "calc", "description": "Evaluate an integer arithmetic expression: digits, spaces, + - * / ( ); / is integer division.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}`,
  `{"type": "function", "function": {"name": "search", "description": "Search the documents for a query and return the best passages.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}}`,
  `{"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}`,
];

/** Deterministic calc exchanges: question, tool call in both JSON shapes, result, answer. */
function calcExchanges(): string {
  const lines: string[] = [];
  const ops = ["+", "-", "*"];
  for (let i = 0; i < 60; i++) {
    const a = (i * 7 + 3) % 30;
    const b = (i * 11 + 5) % 13;
    const c = (i * 5 + 1) % 9;
    const op1 = ops[i % 3] as string;
    const op2 = ops[(i * 2 + 1) % 3] as string;
    const expr = i % 4 === 0 ? `(${a} ${op1} ${b}) ${op2} ${c}` : i % 2 === 0 ? `${a}${op1}${b}${op2}${c}` : `${a} ${op1} ${b}`;
    // Plain integer arithmetic, left to right with * first, as the calc tool evaluates it.
    const value = evalSimple(expr);
    lines.push(`What is ${expr}?`);
    lines.push(`{"name": "calc", "arguments": {"expression": "${expr}"}}`);
    lines.push(`{"name": "calc", "parameters": {"expression": "${expr}"}}`);
    lines.push(String(value));
    lines.push(`Answer: ${value}`);
    if (i % 5 === 0) lines.push(`The expression ${expr} equals ${value}, so the answer is ${value}.`);
  }
  return lines.join("\n");
}

function evalSimple(expr: string): number {
  // Only + - * ( ) and integers: evaluated by a tiny recursive-descent parser, no eval.
  const toks = expr.match(/\d+|[-+*()]/g) ?? [];
  let p = 0;
  const atom = (): number => {
    const t = toks[p++];
    if (t === "(") {
      const v = sum();
      p++;
      return v;
    }
    return Number(t);
  };
  const prod = (): number => {
    let v = atom();
    while (toks[p] === "*") {
      p++;
      v *= atom();
    }
    return v;
  };
  const sum = (): number => {
    let v = prod();
    while (toks[p] === "+" || toks[p] === "-") {
      const op = toks[p++];
      v = op === "+" ? v + prod() : v - prod();
    }
    return v;
  };
  return sum();
}

/** The training corpus (about 15 KB). */
export function madeCorpus(): string {
  return [SENTENCES, SYSTEM_PROMPTS, TOOLS_JSON.join("\n"), calcExchanges(), SENTENCES].join("\n");
}
