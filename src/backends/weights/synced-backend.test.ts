import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { realClock } from "../../core/real-clock.js";
import { BackendUnreachableError, type GenerateRequest, type GenerateResult, type TokenBackend, type TokenDelta } from "../backend.js";
import type { EngineWeightLoader, InFlightOnSwitch } from "./engine-weights.js";
import { SyncedBackend } from "./synced-backend.js";

/**
 * An engine whose generations end when the test says (`finishNext`), reporting no version (as vLLM), and a
 * stream that yields one token per `push`.
 */
function heldEngine(model?: string) {
  const pending: { req: GenerateRequest; done: (r: GenerateResult) => void }[] = [];
  const pushes: ((d: TokenDelta | null) => void)[] = [];
  const backend: TokenBackend = {
    name: "ext",
    url: "http://127.0.0.1:1/v1",
    ...(model !== undefined ? { servedModel: model } : {}),
    type: "vllm",
    capabilities: { tokenIds: true, logprobs: true, pauseRestore: false },
    chatCompletions: async () => ({ status: 200, json: {} }),
    completions: async () => ({ status: 200, json: {} }),
    models: async () => [],
    health: async () => {},
    scrapeMetrics: async () => ({ running: null, waiting: null, kvUsage: null, kvCapacityTokens: null, prefixCacheQueries: null, prefixCacheHits: null, prefixCacheHitRate: null }),
    generate: (req) => new Promise((done) => pending.push({ req, done })),
    generateStream: async () => {
      const ids: number[] = [];
      async function* deltas() {
        for (;;) {
          const d = await new Promise<TokenDelta | null>((r) => pushes.push(r));
          if (d === null) return;
          ids.push(...d.ids);
          yield d;
        }
      }
      return { deltas: deltas(), result: () => ({ outputTokenIds: ids, logprobs: ids.map(() => -1), finishReason: "stop", policyVersion: null, promptTokenIds: [1] }) };
    },
  };
  return {
    backend,
    pending,
    finishNext: () => pending.shift()!.done({ outputTokenIds: [5], logprobs: [-0.5], finishReason: "stop", policyVersion: null, promptTokenIds: [1] }),
    push: (ids: number[] | null) => pushes.shift()!(ids === null ? null : { ids, logprobs: ids.map(() => -1), policyVersion: null }),
  };
}

/** A loader that records what it was asked and can be told to fail or to answer another mode. */
function scriptedLoader(opts: { mode?: InFlightOnSwitch; fail?: string; model?: (v: number) => string } = {}) {
  const log: string[] = [];
  let loaded = 0;
  const loader: EngineWeightLoader = {
    kind: "scripted",
    format: "hf",
    prepare: async (m) => {
      log.push(`prepare ${m}`);
      return opts.mode ?? m;
    },
    load: async (path, v) => {
      log.push(`load ${path} v${v}`);
      if (opts.fail) throw new Error(opts.fail);
      loaded = v;
    },
    recover: async () => {
      log.push("recover");
    },
    servedVersion: async () => null,
    ...(opts.model ? { modelName: () => opts.model!(loaded) } : {}),
  };
  return { loader, log };
}

const req: GenerateRequest = { promptTokenIds: [1], maxTokens: 4, temperature: 1 };
const tick = () => new Promise((r) => setImmediate(r));

describe("SyncedBackend", () => {
  it("drains in-flight calls before loading, holds new calls during the switch, and records the version that served each", async () => {
    const e = heldEngine();
    const { loader, log } = scriptedLoader();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader, inFlight: "finish", clock: realClock });
    const before = s.backend.generate(req);
    await tick();
    const switching = s.switchTo("/ckpt/v1", 1);
    await tick();
    expect(log).toEqual(["prepare finish"]); // not loaded while a call is in flight
    const during = s.backend.generate(req);
    await tick();
    expect(e.pending).toHaveLength(1); // the new call waits for the switch
    e.finishNext();
    expect((await before).policyVersion).toBe(0);
    const outcome = await switching;
    expect(outcome).toMatchObject({ backend: "ext", version: 1, mode: "finish", inFlight: 1 });
    expect(log).toEqual(["prepare finish", "load /ckpt/v1 v1"]);
    await tick();
    e.finishNext();
    expect((await during).policyVersion).toBe(1);
    expect(s.version).toBe(1);
  });

  it("keeps a version the engine reports itself", async () => {
    const e = heldEngine();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader: scriptedLoader().loader, inFlight: "finish", clock: realClock, version: 3 });
    const call = s.backend.generate(req);
    await tick();
    e.pending.shift()!.done({ outputTokenIds: [5], logprobs: [-1], finishReason: "stop", policyVersion: 7, promptTokenIds: [1] });
    expect((await call).policyVersion).toBe(7);
  });

  it("a resuming switch does not wait for in-flight calls; a streamed call knows each token's version", async () => {
    const e = heldEngine();
    const { loader, log } = scriptedLoader();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader, inFlight: "resume", clock: realClock });
    const stream = await s.backend.generateStream!(req);
    const seen: (number | null)[] = [];
    const reading = (async () => {
      for await (const d of stream.deltas) seen.push(d.policyVersion);
    })();
    await tick();
    e.push([10, 11]);
    await tick();
    await s.switchTo("/ckpt/v1", 1); // resolves with the stream still open
    expect(log).toEqual(["prepare resume", "load /ckpt/v1 v1"]);
    e.push([12]);
    await tick();
    e.push(null);
    await reading;
    expect(seen).toEqual([0, 1]);
    const r = stream.result();
    expect(r.policyVersion).toBe(0);
    expect(r.tokenPolicyVersions).toEqual([0, 0, 1]);
  });

  it("a non-streamed call that a resuming switch continued records its tokens' versions as unknown", async () => {
    const e = heldEngine();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader: scriptedLoader().loader, inFlight: "resume", clock: realClock });
    const call = s.backend.generate(req);
    await tick();
    await s.switchTo("/ckpt/v1", 1);
    e.finishNext();
    expect(await call).toMatchObject({ policyVersion: 0, tokenPolicyVersions: [null] });
  });

  it("drains even when the engine falls back from abort to finish, and reports the mode applied", async () => {
    const e = heldEngine();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader: scriptedLoader({ mode: "finish" }).loader, inFlight: "abort", clock: realClock });
    const call = s.backend.generate(req);
    await tick();
    const switching = s.switchTo("/v1", 1);
    await tick();
    e.finishNext();
    await call;
    expect((await switching).mode).toBe("finish");
  });

  it("a failed load retires the backend: the error names it, the loader recovers, calls and health checks fail with the reason", async () => {
    const e = heldEngine();
    const { loader, log } = scriptedLoader({ fail: "engine said: no such file" });
    const retired: string[] = [];
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader, inFlight: "finish", clock: realClock, onRetired: (r) => retired.push(r) });
    await expect(s.switchTo("/missing", 1)).rejects.toThrow(/weight sync: backend ext failed to load version 1: engine said: no such file/);
    expect(retired).toEqual([s.retired]);
    expect(log).toEqual(["prepare finish", "load /missing v1", "recover"]);
    expect(s.retired).toMatch(/no such file/);
    expect(s.version).toBe(0);
    await expect(s.backend.generate(req)).rejects.toBeInstanceOf(BackendUnreachableError);
    await expect(s.backend.health()).rejects.toThrow(/out of rotation: .*no such file/);
    await expect(s.switchTo("/v2", 2)).rejects.toThrow(/out of rotation/);
  });

  it("a drain that exceeds its bound fails the switch and retires the backend", async () => {
    const clock = new VirtualClock();
    const e = heldEngine();
    const { loader, log } = scriptedLoader();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader, inFlight: "finish", clock, drainTimeoutMs: 5000 });
    void s.backend.generate(req).catch(() => {});
    await tick();
    const switching = s.switchTo("/v1", 1);
    const failed = expect(switching).rejects.toThrow(/backend ext still has 1 call\(s\) in flight after 5000 ms; version 1 not loaded/);
    await tick();
    clock.advance(5000);
    await failed;
    expect(log).toEqual(["prepare finish"]);
    expect(s.retired).toMatch(/still has 1 call\(s\) in flight after 5000 ms/);
    // Out of rotation for good: calls, health checks and further switches fail naming why.
    await expect(s.backend.generate(req)).rejects.toThrow(/out of rotation: .*still has 1 call\(s\) in flight after 5000 ms/);
    await expect(s.backend.health()).rejects.toThrow(/out of rotation: .*still has 1 call\(s\) in flight after 5000 ms/);
    await expect(s.switchTo("/v2", 2)).rejects.toThrow(/backend ext is out of rotation: .*in flight after 5000 ms/);
  });

  it("stays healthy while it switches (its engine restarting fails its own probe): calls wait for the switch", async () => {
    const e = heldEngine();
    let restarting = false;
    e.backend.health = async () => {
      if (restarting) throw new Error("connect ECONNREFUSED (llama-server restarting)");
    };
    let loaded!: () => void;
    const { loader } = scriptedLoader();
    loader.load = () => ((restarting = true), new Promise<void>((r) => (loaded = r)));
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader, inFlight: "finish", clock: realClock });
    const switching = s.switchTo("/v1", 1);
    await tick();
    await expect(e.backend.health()).rejects.toThrow(/restarting/);
    await expect(s.backend.health()).resolves.toBeUndefined();
    restarting = false;
    loaded();
    await switching;
    await expect(s.backend.health()).resolves.toBeUndefined();
  });

  it("switching to the version served is a no-op; a second switch while one runs is refused", async () => {
    const e = heldEngine();
    const { loader, log } = scriptedLoader();
    const s = new SyncedBackend({ makeBackend: () => e.backend, loader, inFlight: "finish", clock: realClock });
    await s.switchTo("/v0", 0);
    expect(log).toEqual([]);
    const call = s.backend.generate(req);
    await tick();
    const first = s.switchTo("/v1", 1);
    await expect(s.switchTo("/v1", 1)).rejects.toThrow(/already switching/);
    e.finishNext();
    await call;
    await first;
  });

  it("remakes the adapter when a load changes the model name requests must carry (a LoRA adapter per version)", async () => {
    const made: (string | undefined)[] = [];
    const s = new SyncedBackend({
      makeBackend: (model) => {
        made.push(model);
        return heldEngine(model ?? "base").backend;
      },
      loader: scriptedLoader({ model: (v) => `arbor-v${v}` }).loader,
      inFlight: "finish",
      clock: realClock,
    });
    expect(s.backend.servedModel).toBe("base");
    await s.switchTo("/lora/v1", 1);
    expect(made).toEqual([undefined, "arbor-v1"]);
    expect(s.backend.servedModel).toBe("arbor-v1");
  });
});
