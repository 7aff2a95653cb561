// The gateway's in-process tokenizer (config backends[].tokenizer) against an engine that tokenizes with
// the same model: the same ids and texts on the gateway bench's conversations, turn by turn; and a
// tokenizer of another model is refused before it builds a prompt.
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { BackendHttpError, BackendUnreachableError, type TokenBackend, type TokenizeRequest } from "./backend.js";
import { startFakeVllm, type FakeVllm } from "./fake-vllm.js";
import { loadServedTokenizer, localTokenizer } from "./local-tokenizer.js";
import { TokenizerMismatchError, withLocalTokenizer } from "./local-tokenizer-backend.js";
import { createBackend } from "./registry.js";
import { createVllmBackend } from "./vllm.js";
import { systemPrompt } from "../bench/gateway-bench-load.js";
import { BackendConfigSchema } from "../core/config.js";
import type { ChatMessage } from "../core/types.js";

const CHATML = fileURLToPath(new URL("../../models/calc-chatml-sft.gguf", import.meta.url));
const ARBOR_VOCAB = fileURLToPath(new URL("../../models/calc-sft.gguf", import.meta.url));

let fake: FakeVllm | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

/** The engine's backend and the same backend with `gguf`'s tokenizer in process, on a fake serving `served`. */
async function backends(served: string | undefined, gguf: string): Promise<{ engine: TokenBackend; local: TokenBackend }> {
  fake = await startFakeVllm({ maxModelLen: 4096, ...(served !== undefined ? { tokenizer: loadServedTokenizer(served, "test") } : {}) });
  const engine = createVllmBackend({ name: "v", url: fake.url });
  return { engine, local: withLocalTokenizer(createVllmBackend({ name: "v", url: fake.url }), localTokenizer(loadServedTokenizer(gguf, "test"))) };
}

describe("local tokenizer vs the engine's /tokenize", () => {
  it("agrees on every turn of the gateway bench's conversations: renders, texts and decoded answers", async () => {
    const { engine, local } = await backends(CHATML, CHATML);
    for (const systemChars of [0, 300, 2000]) {
      const messages: ChatMessage[] = [{ role: "system", content: systemPrompt(systemChars) }];
      for (let turn = 0; turn < 4; turn++) {
        messages.push({ role: "user", content: `step ${turn}: run the next command and report what it printed in a few words` });
        for (const addGenerationPrompt of [true, false]) {
          const req: TokenizeRequest = { messages, addGenerationPrompt };
          expect(await local.tokenize!(req)).toEqual(await engine.tokenize!(req));
        }
        const prompt = (await local.tokenize!({ messages, addGenerationPrompt: true })).tokens;
        const out = await engine.generate({ promptTokenIds: prompt, maxTokens: turn % 2 === 0 ? 16 : 6, temperature: 1 });
        const answer = await local.detokenize!(out.outputTokenIds);
        expect(answer).toBe(await engine.detokenize!(out.outputTokenIds));
        messages.push({ role: "assistant", content: answer.replace("<|im_end|>", "") });
      }
    }
    for (const [text, addSpecialTokens] of [["step 3: <|im_end|> naïve", true], ["", false], ["<tool_call>", false]] as const) {
      expect(await local.tokenize!({ text, addSpecialTokens, parseSpecial: true })).toEqual(await engine.tokenize!({ text, addSpecialTokens, parseSpecial: true }));
    }
    // Tools in the shape the template is given render here; the engine's max_model_len comes with local answers.
    const tools = [{ type: "function", function: { name: "run", description: "Run a command", parameters: { type: "object", properties: { cmd: { type: "string" } } } } }];
    const withTools: TokenizeRequest = { messages: [{ role: "user", content: "ls" }], addGenerationPrompt: true, tools };
    expect(await local.tokenize!(withTools)).toEqual(await engine.tokenize!(withTools));
    expect((await local.tokenize!(withTools)).maxModelLen).toBe(4096);
  });

  it("leaves to the engine what only it can answer: tools in another key order, ids outside the vocabulary", async () => {
    const served = localTokenizer(loadServedTokenizer(CHATML, "test"));
    const reordered = [{ function: { name: "run" }, type: "function" }];
    expect(served.tokenize({ messages: [{ role: "user", content: "ls" }], addGenerationPrompt: true, tools: reordered })).toBeUndefined();
    expect(served.detokenize([1, 100_000])).toBeUndefined();
    const { local } = await backends(CHATML, CHATML);
    // The engine's own 400 answers an id it does not have.
    await expect(local.detokenize!([1, 100_000])).rejects.toBeInstanceOf(BackendHttpError);
  });

  it("refuses every call with a tokenizer that is not the served model's, naming the difference", async () => {
    // The engine serves the byte-level fake; the config names the ChatML model's GGUF.
    const { local } = await backends(undefined, CHATML);
    const call = (): Promise<unknown> => local.tokenize!({ messages: [{ role: "user", content: "hi" }], addGenerationPrompt: true });
    await expect(call()).rejects.toBeInstanceOf(TokenizerMismatchError);
    await expect(call()).rejects.toThrow(/tokenizes a 4-turn conversation with the generation prompt as \[.*\] but the local tokenizer .*calc-chatml-sft\.gguf \(config backends\[\]\.tokenizer\) gives \[.*not the served model's tokenizer/);
    await expect(local.detokenize!([1, 2])).rejects.toBeInstanceOf(TokenizerMismatchError);
    await fake!.close();
    // Another real vocabulary (Arbor's) against the ChatML engine is refused the same way.
    const other = await backends(CHATML, ARBOR_VOCAB);
    await expect(other.local.tokenize!({ text: "hi", addSpecialTokens: false })).rejects.toBeInstanceOf(TokenizerMismatchError);
  });

  it("probes again after the engine could not be reached", async () => {
    const { engine } = await backends(CHATML, CHATML);
    let down = true;
    const flaky: TokenBackend = { ...engine, tokenize: (req) => (down ? Promise.reject(new BackendUnreachableError("v", engine.url, "connection refused")) : engine.tokenize!(req)) };
    const local = withLocalTokenizer(flaky, localTokenizer(loadServedTokenizer(CHATML, "test")));
    const req: TokenizeRequest = { text: "hi there", addSpecialTokens: false };
    await expect(local.tokenize!(req)).rejects.toThrow(/not reachable: connection refused/);
    down = false;
    expect(await local.tokenize!(req)).toEqual(await engine.tokenize!(req));
  });
});

describe("backends[].tokenizer", () => {
  it("loads the GGUF's tokenizer for a vllm backend, naming the field on a bad file", async () => {
    fake = await startFakeVllm({ tokenizer: loadServedTokenizer(CHATML, "test") });
    const b = createBackend({ name: "v", type: "vllm", url: fake.url, tokenizer: CHATML });
    expect((await b.tokenize!({ text: "hello", addSpecialTokens: false })).tokens).toEqual(loadServedTokenizer(CHATML, "t").tokenizer.encode("hello"));
    expect(() => createBackend({ name: "v", type: "vllm", url: fake!.url, tokenizer: "/nonexistent/model.gguf" })).toThrow(/backend 'v' tokenizer: cannot read \/nonexistent\/model\.gguf/);
    expect(() => loadServedTokenizer("tokenizer.json", "backend 'v' tokenizer")).toThrow(/backend 'v' tokenizer: "tokenizer\.json" is not a \.gguf file/);
    expect(() => createBackend({ name: "o", type: "openai", url: fake!.url, tokenizer: CHATML })).toThrow(/backend 'o' tokenizer: only used with type: vllm or builtin/);
    const parsed = BackendConfigSchema.safeParse({ name: "s", type: "sglang", url: fake.url, tokenizer: "x.json" });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => `${i.path.join(".")}: ${i.message}`)).toEqual(["tokenizer: must be a .gguf file (the served model's GGUF)", "tokenizer: only used with type: vllm or builtin (engines with vLLM's /tokenize to check it against)"]);
  });

  it("serves Arbor's vocabulary with Arbor's template and plain-text prompts", () => {
    const served = loadServedTokenizer(ARBOR_VOCAB, "test");
    expect(served.arbor).toBe(true);
    const local = localTokenizer(served);
    // Special-token text in a plain prompt stays text for Arbor's vocabulary (as its engine reads it).
    expect(local.tokenize({ text: "<|end|>", addSpecialTokens: false })).toEqual(served.tokenizer.encode("<|end|>"));
    expect(local.tokenize({ messages: [{ role: "user", content: "1+1" }], addGenerationPrompt: true })).toEqual(served.chat.render([{ role: "user", content: "1+1" }], { addGenerationPrompt: true }));
  });
});
