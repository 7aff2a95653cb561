// The SFT checkpoint shipped in models/ (what `npm start` starts RL from): real llama.cpp loads it, and on
// calc tasks it answers the first turn with a well-formed calc tool call and the second with `Answer: <n>`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseToolCalls } from "../agents/markup.js";
import { createCalcEnvironment } from "../envs/calc/calc.js";
import { validateCalcInput } from "../envs/calc/tool.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { readGguf } from "../model/gguf.js";

const PATH = "models/calc-sft.gguf";
const env = createCalcEnvironment();
let server: ListeningEngineServer;

beforeAll(async () => {
  server = await startEngineServer({ name: "sft", modelPath: PATH, policyVersion: 0, sequences: 2, contextSize: 1024, maxWaiting: 16, seed: 1 });
}, 60_000);

afterAll(async () => {
  await server?.close();
});

async function greedy(messages: object[]): Promise<string> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "arbor-tiny", messages, max_tokens: 32, temperature: 0 }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
  expect(body.choices[0]!.finish_reason).toBe("stop");
  return body.choices[0]!.message.content;
}

describe("shipped SFT checkpoint", () => {
  it("records how it was made (the `arbor sft` settings that reproduce it)", () => {
    const made = JSON.parse(readGguf(PATH).metadata.get("arbor.sft") as string) as Record<string, unknown>;
    expect(made).toMatchObject({ env: "calc", step: made.steps, seed: 1 });
  });

  it("calls the calc tool with a valid expression, then answers in the checker's format", async () => {
    for (const task of env.tasks(4, 7)) {
      const first = await greedy(task.prompt);
      const parsed = parseToolCalls(first);
      expect(parsed.malformed).toEqual([]);
      expect(parsed.calls).toHaveLength(1);
      expect(parsed.calls[0]!.name).toBe("calc");
      expect(validateCalcInput(parsed.calls[0]!.input)).toBeNull();
      const second = await greedy([...task.prompt, { role: "assistant", content: first }, { role: "tool", name: "calc", content: "42" }]);
      expect(second).toMatch(/^Answer: -?\d+$/);
    }
  });
});
