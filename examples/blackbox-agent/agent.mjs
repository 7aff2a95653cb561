// A small calculator agent written with the official `openai` client and nothing Arbor-specific:
// it reads OPENAI_BASE_URL and OPENAI_API_KEY like any OpenAI program, asks the model, runs the
// `calc` tool calls it makes locally (with bc), feeds the results back, and prints the final answer.
//
//   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... AGENT_MODEL=gpt-4o-mini \
//     node agent.mjs "What is 12*7+3?"
//
// Arbor runs it unchanged as a black box: inside a sandbox, with the variables pointing at the
// program's gateway endpoint, so every call it makes becomes the program's trajectory.
import { execFileSync } from "node:child_process";
import OpenAI from "openai";

const MAX_TURNS = 4;
const question = process.argv.slice(2).join(" ").trim();
if (question === "") {
  console.error('usage: node agent.mjs "What is 12*7+3?"');
  process.exit(2);
}

const tools = [
  {
    type: "function",
    function: {
      name: "calc",
      description: "Evaluate an integer arithmetic expression: digits, spaces, + - * / ( ); / is integer division.",
      parameters: {
        type: "object",
        properties: { expression: { type: "string", description: "e.g. 12*7+3" } },
        required: ["expression"],
        additionalProperties: false,
      },
    },
  },
];

/** The local tool: bc on a validated expression. */
function calc(expression) {
  if (typeof expression !== "string" || !/^[\d\s+\-*/()]{1,200}$/.test(expression)) {
    return "calc error: only digits, spaces, + - * / ( ) are allowed";
  }
  try {
    return execFileSync("bc", ["-q"], { input: `${expression}\n`, encoding: "utf8", env: { BC_LINE_LENGTH: "0" } }).trim();
  } catch (e) {
    return `calc error: ${e.message.split("\n")[0]}`;
  }
}

const client = new OpenAI({ maxRetries: 0 });
const model = process.env.AGENT_MODEL ?? "arbor-tiny";
const messages = [
  { role: "system", content: "Use the calc tool to compute, then reply with 'Answer: <integer>'." },
  { role: "user", content: question },
];

for (let turn = 0; turn < MAX_TURNS; turn++) {
  const res = await client.chat.completions.create({ model, messages, tools, max_tokens: 128, temperature: 0 });
  const message = res.choices[0].message;
  messages.push(message);
  if (!message.tool_calls || message.tool_calls.length === 0) {
    console.log(message.content ?? "");
    process.exit(0);
  }
  for (const call of message.tool_calls) {
    let output;
    try {
      output = call.function.name === "calc" ? calc(JSON.parse(call.function.arguments).expression) : `unknown tool ${call.function.name}`;
    } catch (e) {
      output = `bad arguments: ${e.message}`;
    }
    messages.push({ role: "tool", tool_call_id: call.id, content: output });
  }
}
console.error(`no answer after ${MAX_TURNS} turns`);
process.exit(1);
