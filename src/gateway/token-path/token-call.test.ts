import { describe, expect, it } from "vitest";
import {
  BackendHttpError,
  BackendUnreachableError,
  type GenerateRequest,
  type GenerateResult,
  type TokenBackend,
  type TokenizeRequest,
} from "../../backends/backend.js";
import { GatewayRejection } from "../auth/auth-errors.js";
import { InvalidRequestError } from "../http-errors.js";
import type { TokenSampling } from "./sampling.js";
import { runTokenCall, type TokenCallDeps } from "./token-call.js";

type Fault = "unreachable" | "http500" | "http400" | undefined;

interface Fake extends TokenBackend {
  generated: GenerateRequest[];
  tokenized: TokenizeRequest[];
}

/** An in-memory token backend: chat renders to [1, ...lengths], answers [7, 8, 2] (2 = stop). */
function fake(name: string, faults: { generate?: Fault; tokenize?: Fault; detokenize?: Fault; maxModelLen?: number | null } = {}): Fake {
  const fail = (f: Fault): void => {
    if (f === "unreachable") throw new BackendUnreachableError(name, `http://${name}`, "read ECONNRESET");
    if (f === "http500") throw new BackendHttpError(name, `http://${name}`, 500, "boom");
    if (f === "http400") throw new BackendHttpError(name, `http://${name}`, 400, "prompt too long", { error: { message: "prompt too long" } });
  };
  const generated: GenerateRequest[] = [];
  const tokenized: TokenizeRequest[] = [];
  return {
    name,
    url: `http://${name}`,
    type: "fake",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
    generated,
    tokenized,
    chatCompletions: () => Promise.reject(new Error("not used")),
    completions: () => Promise.reject(new Error("not used")),
    models: () => Promise.resolve({}),
    health: () => Promise.resolve(),
    scrapeMetrics: () => Promise.reject(new Error("not used")),
    async tokenize(req) {
      tokenized.push(req);
      fail(faults.tokenize);
      const tokens = "messages" in req ? [1, ...req.messages.map((m) => m.content.length + 10)] : [...req.text].map((c) => c.charCodeAt(0));
      return { tokens, maxModelLen: faults.maxModelLen === undefined ? 100 : faults.maxModelLen };
    },
    async detokenize(ids) {
      fail(faults.detokenize);
      return ids.map((i) => `<${i}>`).join("");
    },
    async generate(req): Promise<GenerateResult> {
      generated.push(req);
      fail(faults.generate);
      return { outputTokenIds: [7, 8, 2], logprobs: [-0.5, -0.25, -0.125], finishReason: "stop", policyVersion: 3, promptTokenIds: req.promptTokenIds };
    },
  };
}

const sampling = (over: Partial<TokenSampling> = {}): TokenSampling => ({ maxTokens: 5, maxTokensField: "max_tokens", temperature: 1, stop: [], stopField: "stop", stopTokenIds: [], logprobs: false, model: "m", ...over });

/** Deps routing attempt i to backends[i] (throwing past the end), recording what happened. */
function deps(backends: Fake[]) {
  const log: string[] = [];
  let n = 0;
  const d: TokenCallDeps = {
    route: (_prompt, failed) => {
      const b = backends[n];
      if (!b) throw new Error(`no backend left (failed: ${failed.join(", ")})`);
      log.push(`route ${n} ${b.name}`);
      const id = n++;
      return { routeId: id, backend: b, signal: new AbortController().signal, done: () => log.push(`done ${id}`) };
    },
    finished: (id, o) => log.push(`finished ${id} ${o ? "ok" : "failed"}`),
    transportFailed: (b) => log.push(`down ${b}`),
    retrying: (b) => log.push(`retry from ${b}`),
  };
  return { d, log };
}

const input = (s = sampling()) => ({ programId: "p", source: { endpoint: "chat" as const, messages: [{ role: "user" as const, content: "hello" }] }, previous: undefined, sampling: s });

describe("runTokenCall", () => {
  it("generates on the routed backend and decodes the answer without its stop token", async () => {
    const a = fake("a");
    const { d, log } = deps([a]);
    const r = await runTokenCall(input(sampling({ logprobs: true })), d);
    expect(r.backend).toBe(a);
    expect(r.promptTokenIds).toEqual([1, 15]);
    expect(r.decoded).toEqual({ text: "<7><8>", tokenTexts: ["<7>", "<8>", "<2>"] });
    expect(a.generated[0]).toMatchObject({ promptTokenIds: [1, 15], maxTokens: 5, temperature: 1, programId: "p" });
    expect(a.generated[0]).not.toHaveProperty("draftGroupId");
    expect(log).toEqual(["route 0 a", "finished 0 ok", "done 0"]);
    // A program of a GRPO group names it, for engines that draft from the siblings.
    const b = fake("b");
    await runTokenCall({ ...input(), draftGroupId: "g7" }, deps([b]).d);
    expect(b.generated[0]).toMatchObject({ programId: "p", draftGroupId: "g7" });
  });

  for (const fault of ["unreachable", "http500"] as const) {
    it(`retries once elsewhere with the same prompt ids after a ${fault} generate`, async () => {
      const [a, b] = [fake("a", { generate: fault }), fake("b")];
      const { d, log } = deps([a, b]);
      const r = await runTokenCall(input(), d);
      expect(r.backend).toBe(b);
      expect(b.generated[0]!.promptTokenIds).toEqual(a.generated[0]!.promptTokenIds);
      // The prompt was built once, on 'a'.
      expect(b.tokenized).toEqual([]);
      expect(log).toEqual(["route 0 a", "down a", "retry from a", "finished 0 failed", "done 0", "route 1 b", "finished 1 ok", "done 1"]);
    });
  }

  it("rebuilds the prompt on the retry backend when the first failed while tokenizing", async () => {
    const [a, b] = [fake("a", { tokenize: "unreachable" }), fake("b")];
    const r = await runTokenCall(input(), deps([a, b]).d);
    expect(r.backend).toBe(b);
    expect(a.generated).toEqual([]);
    expect(b.tokenized).toHaveLength(1);
  });

  it("does not retry an engine's 4xx, nor a failure after the engine produced the answer", async () => {
    const e400 = await runTokenCall(input(), deps([fake("a", { generate: "http400" }), fake("b")]).d).catch((e: unknown) => e);
    expect(e400).toBeInstanceOf(BackendHttpError);
    expect((e400 as BackendHttpError).status).toBe(400);
    const { d, log } = deps([fake("a", { detokenize: "unreachable" }), fake("b")]);
    await expect(runTokenCall(input(), d)).rejects.toBeInstanceOf(BackendUnreachableError);
    expect(log).toEqual(["route 0 a", "finished 0 ok", "done 0"]);
  });

  it("fails with a 502 naming both backends and causes after two transport failures", async () => {
    const { d, log } = deps([fake("a", { generate: "unreachable" }), fake("b", { generate: "http500" }), fake("c")]);
    const e = (await runTokenCall(input(), d).catch((x: unknown) => x)) as GatewayRejection;
    expect(e).toBeInstanceOf(GatewayRejection);
    expect(e.status).toBe(502);
    expect(e.message).toMatch(/backend 'a' failed: .*ECONNRESET; backend 'b' failed: .*HTTP 500: boom/);
    expect(log.filter((l) => l.startsWith("route"))).toEqual(["route 0 a", "route 1 b"]);
  });

  it("fails with a 503 when no other backend can take the retry", async () => {
    const e = (await runTokenCall(input(), deps([fake("a", { generate: "unreachable" })]).d).catch((x: unknown) => x)) as GatewayRejection;
    expect(e.status).toBe(503);
    expect(e.message).toMatch(/backend 'a' failed: .*; no other backend could take the retry \(no backend left \(failed: a\)\)/);
  });

  it("maps one-token stop strings to stop ids and refuses longer ones, naming the field", async () => {
    const a = fake("a");
    await runTokenCall(input(sampling({ stop: ["!"], stopTokenIds: [9] })), deps([a]).d);
    expect(a.generated[0]!.stopTokenIds).toEqual([9, 33]);
    const e = await runTokenCall(input(sampling({ stop: ["!", "ab"] })), deps([fake("a")]).d).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidRequestError);
    expect((e as Error).message).toMatch(/^stop\[1\]: "ab" is 2 tokens for backend 'a'/);
  });

  it("fills max_tokens up to the context, and needs it where the engine reports no context length", async () => {
    const a = fake("a");
    await runTokenCall(input(sampling({ maxTokens: undefined })), deps([a]).d);
    expect(a.generated[0]!.maxTokens).toBe(98);
    const e = await runTokenCall(input(sampling({ maxTokens: undefined })), deps([fake("a", { maxModelLen: null })]).d).catch((x: unknown) => x);
    expect((e as Error).message).toMatch(/^max_tokens: required/);
  });

  it("clamps a max_tokens larger than the context leaves and says so; refuses it by policy naming the client's field", async () => {
    const a = fake("a");
    const r = await runTokenCall(input(sampling({ maxTokens: 64_000 })), deps([a]).d);
    // A context of 100 tokens, a prompt of 2: 98 left.
    expect(a.generated[0]!.maxTokens).toBe(98);
    expect(r.maxTokensClamped).toEqual({ asked: 64_000, granted: 98 });
    const fits = await runTokenCall(input(sampling({ maxTokens: 98 })), deps([fake("a")]).d);
    expect(fits.maxTokensClamped).toBeUndefined();
    const b = fake("b");
    const e = await runTokenCall({ ...input(sampling({ maxTokens: 99, maxTokensField: "max_output_tokens" })), maxTokensPolicy: "refuse" }, deps([b]).d).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidRequestError);
    expect((e as Error).message).toMatch(/^max_output_tokens: is 99, more than the 98 tokens the context leaves \(backend 'b' has a context of 100 tokens, the prompt takes 2\)/);
    expect(b.generated).toHaveLength(0);
    // No context length known: the budget goes to the engine as asked.
    const c = fake("c", { maxModelLen: null });
    const unknown = await runTokenCall(input(sampling({ maxTokens: 64_000 })), deps([c]).d);
    expect(c.generated[0]!.maxTokens).toBe(64_000);
    expect(unknown.maxTokensClamped).toBeUndefined();
  });
});
