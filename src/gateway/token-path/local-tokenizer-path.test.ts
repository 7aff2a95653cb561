// The token path with the model's tokenizer in the gateway (config backends[].tokenizer) against Arbor's
// engine serving the made-here BPE + ChatML model with llama.cpp's tokenizer of the same GGUF: a
// gateway that asks the engine to tokenize and one that tokenizes itself record the very same calls —
// prompt ids turn after turn (the gateway bench's conversations, and a tool loop), output ids, texts —
// and neither resets a context. The answers are scripted in the model's own ids (the weights are random).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBackend } from "../../backends/registry.js";
import { systemPrompt } from "../../bench/gateway-bench-load.js";
import { BackendConfigSchema } from "../../core/config.js";
import type { Call } from "../../core/types.js";
import { LlamaTokenizer } from "../../engine/llama-tokenizer.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { makeModel } from "../../model/made/made-models.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import { createGateway, type Gateway } from "../server.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-local-tok-"));
const CALL = '<tool_call>\n{"name": "run", "arguments": {"cmd": "ls"}}\n</tool_call>';
let tokenizer: LlamaTokenizer;
let engine: ListeningEngineServer;
const gateways: Gateway[] = [];
const urls: Record<"engine" | "local", string> = { engine: "", local: "" };
const calls: Record<"engine" | "local", Call[]> = { engine: [], local: [] };

beforeAll(async () => {
  const made = makeModel("bpe-chatml", dir, { seed: 4, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 4096 });
  tokenizer = await LlamaTokenizer.load(made.path);
  // An answer that depends on the prompt (its last characters), a tool call when tools are declared and no result came back yet.
  const executor = new ScriptedExecutor((prompt) => (prompt.includes("<tools>") && !prompt.includes("<tool_response>") ? CALL : `Done: ${prompt.slice(-40, -20)} ok`), {
    tokenizer,
    contextSize: 4096,
    sequences: 2,
  });
  engine = await startEngineServer({ name: "bpe", modelPath: made.path, policyVersion: 0, sequences: 2, contextSize: 4096, maxWaiting: 8, executor, servedModelName: "bpe-chatml" });
  for (const key of ["engine", "local"] as const) {
    const cfg = BackendConfigSchema.parse({ name: "bpe", type: "builtin", url: engine.url, ...(key === "local" ? { tokenizer: made.path } : {}) });
    const g = createGateway({ backends: [createBackend(cfg, { ...engine.served.formats })], sink: { recordCall: async (c) => void calls[key].push(c) } });
    gateways.push(g);
    urls[key] = await g.listen("127.0.0.1", 0);
  }
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.close();
  await engine?.close();
  await tokenizer?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

type Msg = Record<string, unknown>;

/** One chat turn through `key`'s gateway for `programId`; the assistant message sent back next turn. */
async function turn(key: "engine" | "local", programId: string, body: Record<string, unknown>): Promise<Msg> {
  const res = await fetch(`${urls[key]}/p/${programId}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "bpe-chatml", temperature: 0, ...body }) });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { choices: { message: Msg }[] };
  const m = json.choices[0]!.message;
  return { role: "assistant", content: m.content ?? "", ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}) };
}

/** Run the same conversation through both gateways; the recorded calls of each. */
async function both(programId: string, steps: (send: (body: Record<string, unknown>) => Promise<Msg>) => Promise<void>): Promise<Record<"engine" | "local", Call[]>> {
  for (const key of ["engine", "local"] as const) await steps((body) => turn(key, `${key}-${programId}`, body));
  return { engine: calls.engine.filter((c) => c.programId === `engine-${programId}`), local: calls.local.filter((c) => c.programId === `local-${programId}`) };
}

const same = (r: Record<"engine" | "local", Call[]>, n: number): void => {
  expect(r.engine).toHaveLength(n);
  expect(r.local).toHaveLength(n);
  for (const [i, e] of r.engine.entries()) {
    const l = r.local[i]!;
    expect(l.promptTokenIds).toEqual(e.promptTokenIds);
    expect(l.outputTokenIds).toEqual(e.outputTokenIds);
    expect(l.outputText).toBe(e.outputText);
    expect([l.contextReset ?? false, e.contextReset ?? false]).toEqual([false, false]);
  }
};

describe("local tokenizer vs Arbor's engine (llama.cpp's tokenizer of the same GGUF)", () => {
  it("records the same calls on the gateway bench's conversations, with cut-off and ended answers", async () => {
    for (const [systemChars, maxTokens] of [[2000, 16], [300, 6], [0, 64]] as const) {
      const r = await both(`bench-${systemChars}`, async (send) => {
        const messages: Msg[] = [{ role: "system", content: systemPrompt(systemChars) }];
        for (let t = 0; t < 4; t++) {
          messages.push({ role: "user", content: `step ${t}: run the next command and report what it printed in a few words` });
          messages.push(await send({ messages, max_tokens: maxTokens }));
        }
      });
      same(r, 4);
      expect(tokenizer.decode(r.local[3]!.promptTokenIds, { special: true })).toContain("<|im_start|>user\nstep 3:");
    }
  });

  it("records the same calls through a tool loop (tools rendered by the template)", async () => {
    const tools = [{ type: "function", function: { name: "run", description: "Run a shell command.", parameters: { type: "object", properties: { cmd: { type: "string" } } } } }];
    const r = await both("tools", async (send) => {
      const messages: Msg[] = [{ role: "user", content: "List the files." }];
      const call = await send({ messages, tools, max_tokens: 64 });
      const id = (call.tool_calls as { id: string }[])[0]!.id;
      messages.push(call, { role: "tool", tool_call_id: id, content: "a.txt b.txt" });
      messages.push(await send({ messages, tools, max_tokens: 64 }));
    });
    same(r, 2);
    expect(tokenizer.decode(r.local[1]!.promptTokenIds, { special: true })).toContain("<tool_response>\na.txt b.txt\n</tool_response>");
  });
});
