// The one scripted executor's own behaviour beyond the executor contract (executor-registry.test.ts
// runs that): scripted text and token ids, max_tokens, and the hold and paced hooks tests rely on for
// deterministic timing.
import { describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import type { GenerateRequest } from "../engine/executor.js";
import { Vocab } from "../model/vocab.js";
import { until } from "./engine-http-helpers.js";
import { ScriptedExecutor } from "./scripted-executor.js";

const vocab = new Vocab();
const END = vocab.controlId("<|end|>");
const req = (o: Partial<GenerateRequest> = {}): GenerateRequest => ({
  promptTokenIds: vocab.encode("hi"),
  maxTokens: 16,
  temperature: 1,
  topP: 1,
  topLogprobs: 0,
  rng: new Rng(1),
  ...o,
});

describe("ScriptedExecutor", () => {
  it("answers scripted text with tool markers as control tokens, ended by <|end|>, cut at max_tokens", async () => {
    const ex = new ScriptedExecutor((prompt) => `<|tool_call|>echo ${prompt}<|/tool_call|>`);
    const full = await ex.generate(req());
    expect(full.tokens.map((t) => t.id)).toEqual([vocab.controlId("<|tool_call|>"), ...vocab.encode("echo hi"), vocab.controlId("<|/tool_call|>"), END]);
    expect(full).toMatchObject({ finishReason: "stop", stopTokenId: END });
    const cut = await ex.generate(req({ maxTokens: 3 }));
    expect(cut.tokens).toHaveLength(3);
    expect(cut.finishReason).toBe("length");
    expect(ex.prompts).toEqual(["hi", "hi"]);
    expect(ex.outputs).toEqual([full.tokens.map((t) => t.id), cut.tokens.map((t) => t.id)]);
  });

  it("answers token ids: with a stop token it stops, without one it runs to max_tokens", async () => {
    const ex = new ScriptedExecutor((_p, r) => (r.maxTokens > 4 ? { tokenIds: [5, 6], stopTokenId: vocab.eosId } : { tokenIds: [7, 7, 7, 7] }));
    expect(await ex.generate(req())).toMatchObject({ finishReason: "stop", stopTokenId: vocab.eosId, tokens: [{ id: 5 }, { id: 6 }, { id: vocab.eosId }] });
    const run = await ex.generate(req({ maxTokens: 4 }));
    expect(run.finishReason).toBe("length");
    expect(run.tokens.map((t) => t.id)).toEqual([7, 7, 7, 7]);
  });

  it("holds a generation until its promise resolves; an abort meanwhile, or resolving true, ends it with no tokens", async () => {
    let release = (): void => {};
    const released = new Promise<void>((r) => (release = r));
    const ex = new ScriptedExecutor(() => "ok", { hold: (prompt) => (prompt === "hi" ? released : prompt === "no" ? Promise.resolve(true) : undefined) });
    const held = ex.generate(req());
    const ctl = new AbortController();
    const aborted = ex.generate(req({ signal: ctl.signal }));
    await until(() => ex.running === 2);
    ctl.abort();
    expect(await aborted).toEqual({ tokens: [], finishReason: "abort" });
    expect(ex.produced).toBe(0);
    release();
    expect((await held).finishReason).toBe("stop");
    expect(await ex.generate(req({ promptTokenIds: vocab.encode("no") }))).toEqual({ tokens: [], finishReason: "abort" });
    expect((await ex.generate(req({ promptTokenIds: vocab.encode("go") }))).finishReason).toBe("stop");
  });

  it("paced: each token waits for tick(); lateAbort waits one more tick, slowAbort sees an abort only at the tick", async () => {
    const ex = new ScriptedExecutor(() => "ab", { paced: { lateAbort: true, slowAbort: true } });
    const ctl = new AbortController();
    const run = ex.generate(req({ signal: ctl.signal }));
    for (let n = 1; n <= 3; n++) {
      ex.tick();
      await until(() => ex.produced === n);
    }
    ctl.abort();
    await Promise.resolve();
    expect(ex.running).toBe(1);
    ex.tick();
    expect(await run).toMatchObject({ finishReason: "abort", tokens: [{ id: vocab.encode("a")[0] }, { id: vocab.encode("b")[0] }, { id: END }] });
    expect(ex.running).toBe(0);
  });
});
