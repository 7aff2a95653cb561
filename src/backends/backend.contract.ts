// The one contract every backend adapter passes: token ids and logprobs arrive intact, finish
// reasons map, aborts reject with the caller's reason, an unreachable engine is a
// BackendUnreachableError, metrics and KV capacity parse. Run against fixtures and live engines.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedPort } from "../testing/closed-port.js";
import {
  BackendCapabilityError,
  BackendUnreachableError,
  type BackendCapabilities,
  type BackendMetrics,
  type GenerateRequest,
  type GenerateResult,
  type TokenBackend,
  type TokenizeRequest,
  type TokenizeResult,
} from "./backend.js";

export interface ContractCase {
  label: string;
  req: Omit<GenerateRequest, "signal">;
  expected: GenerateResult;
  /** What the adapter must have sent for this case (matched against the last request received). */
  sent?: { path: string; body: object };
}

export interface ContractHarness {
  backend: TokenBackend;
  /** The same adapter type pointed at `url` (used with a closed port). */
  makeBackend(url: string): TokenBackend;
  capabilities: BackendCapabilities;
  /** Token-level cases (at least one per finish reason the engine can give); empty without tokenIds. */
  cases: ContractCase[];
  /** Exact values the scrape must report (null = the engine does not report it). */
  metrics: Partial<BackendMetrics>;
  /** A request that generates (for the abort check). */
  abortRequest?: Omit<GenerateRequest, "signal">;
  /** Requests received so far and a hold on the server: abort mid-flight. Absent: abort before sending. */
  server?: { requests: { path: string; body: unknown }[]; hold(): void; release(): void; waitForRequests(n: number): Promise<void> };
  /** The engine's own tokenizer, where the adapter has tokenize/detokenize (absent: it must have neither). */
  tokenizer?: {
    cases: { label: string; req: TokenizeRequest; expected: TokenizeResult; sent?: { path: string; body: object } }[];
    detokenize: { ids: number[]; expected: string; sent?: { path: string; body: object } };
  };
  /** Pause then restore `programId` and check the engine saw it (only with capabilities.pauseRestore). */
  pauseRestore?: { programId: string; check(): void };
  close(): Promise<void>;
}

/** Register the contract suite for one adapter; `makeFixtureServer` starts the engine (or its fixture) and the adapter. */
export function describeBackendContract(name: string, makeFixtureServer: () => Promise<ContractHarness>): void {
  describe(`backend contract: ${name}`, () => {
    let h: ContractHarness;
    beforeAll(async () => {
      h = await makeFixtureServer();
    });
    afterAll(async () => {
      await h?.close();
    });

    it("reports its capabilities and answers health checks", async () => {
      expect(h.backend.capabilities).toEqual(h.capabilities);
      await expect(h.backend.health()).resolves.toBeUndefined();
    });

    it("generates with token ids and logprobs intact and finish reasons mapped", async () => {
      if (!h.capabilities.tokenIds) {
        expect(h.cases).toEqual([]);
        const e = await h.backend.generate({ promptTokenIds: [1], maxTokens: 1, temperature: 0 }).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(BackendCapabilityError);
        expect((e as Error).message).toContain("not trainable");
        return;
      }
      expect(h.cases.length).toBeGreaterThan(0);
      for (const c of h.cases) {
        const r = await h.backend.generate(c.req);
        expect(r, c.label).toEqual(c.expected);
        expect(r.logprobs.length, c.label).toBe(r.outputTokenIds.length);
        if (c.sent) {
          const last = h.server?.requests.at(-1);
          expect(last?.path, c.label).toBe(c.sent.path);
          expect(last?.body, c.label).toMatchObject(c.sent.body);
        }
      }
    });

    it("tokenizes and detokenizes with the engine's own tokenizer where it has one", async () => {
      expect(typeof h.backend.tokenize === "function").toBe(h.tokenizer !== undefined);
      expect(typeof h.backend.detokenize === "function").toBe(h.tokenizer !== undefined);
      if (!h.tokenizer || !h.backend.tokenize || !h.backend.detokenize) return;
      const checkSent = (sent: { path: string; body: object } | undefined, label: string): void => {
        if (!sent) return;
        const last = h.server?.requests.at(-1);
        expect(last?.path, label).toBe(sent.path);
        expect(last?.body, label).toMatchObject(sent.body);
      };
      for (const c of h.tokenizer.cases) {
        expect(await h.backend.tokenize(c.req), c.label).toEqual(c.expected);
        checkSent(c.sent, c.label);
      }
      const d = h.tokenizer.detokenize;
      expect(await h.backend.detokenize(d.ids)).toBe(d.expected);
      checkSent(d.sent, "detokenize");
    });

    it("rejects with the caller's reason when aborted", async () => {
      if (!h.capabilities.tokenIds || !h.abortRequest) return;
      const reason = new Error("caller gave up");
      if (!h.server) {
        const ac = new AbortController();
        ac.abort(reason);
        await expect(h.backend.generate({ ...h.abortRequest, signal: ac.signal })).rejects.toBe(reason);
        return;
      }
      const s = h.server;
      s.hold();
      try {
        const ac = new AbortController();
        const before = s.requests.length;
        const p = h.backend.generate({ ...h.abortRequest, signal: ac.signal });
        await s.waitForRequests(before + 1);
        ac.abort(reason);
        await expect(p).rejects.toBe(reason);
      } finally {
        s.release();
      }
    });

    it("throws BackendUnreachableError when the engine cannot be reached", async () => {
      const port = await closedPort();
      const b = h.makeBackend(`http://127.0.0.1:${port}/v1`);
      await expect(b.chatCompletions({ messages: [{ role: "user", content: "x" }] })).rejects.toBeInstanceOf(BackendUnreachableError);
      if (!h.capabilities.tokenIds) return;
      const e = await b.generate({ promptTokenIds: [1, 2], maxTokens: 1, temperature: 0 }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(BackendUnreachableError);
      expect((e as Error).message).toMatch(new RegExp(`^backend '[^']+' at http://127\\.0\\.0\\.1:${port}/v1 is not reachable: .*ECONNREFUSED`));
      await expect(b.scrapeMetrics()).rejects.toBeInstanceOf(BackendUnreachableError);
    });

    it("scrapes load and KV capacity", async () => {
      const m = await h.backend.scrapeMetrics();
      expect(m).toMatchObject(h.metrics);
      for (const [k, v] of Object.entries(m)) {
        expect(v === null || (typeof v === "number" && Number.isFinite(v) && v >= 0), k).toBe(true);
      }
      if (m.kvUsage !== null) expect(m.kvUsage).toBeLessThanOrEqual(1);
      if (m.prefixCacheHitRate !== null) expect(m.prefixCacheHitRate).toBeLessThanOrEqual(1);
    });

    it("pauses and restores a program where the engine can", async () => {
      expect(typeof h.backend.pause === "function").toBe(h.capabilities.pauseRestore);
      expect(typeof h.backend.restore === "function").toBe(h.capabilities.pauseRestore);
      if (!h.pauseRestore || !h.backend.pause || !h.backend.restore) return;
      await h.backend.pause(h.pauseRestore.programId);
      await h.backend.restore(h.pauseRestore.programId);
      h.pauseRestore.check();
    });
  });
}

