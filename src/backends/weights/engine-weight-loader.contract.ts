// The contract every EngineWeightLoader passes, run against an engine (a fake built from the engine's sources, or a
// live one) through a harness that can inspect the engine and inject failures: a load makes the engine serve the new
// path (and version where it reports one), prepare leaves it paused only until load/recover, a refused load rejects
// with code "weight_sync" naming the engine and carrying its message, an unreachable or hung engine fails within
// the timeout naming the url, and loading one version twice loads it once.
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ArborError } from "../../core/errors.js";
import type { EngineWeightLoader, InFlightOnSwitch } from "./engine-weights.js";

export interface WeightLoaderHarness {
  /** The loader under test, named `engineName`, with the timeout the suite asked for. */
  readonly loader: EngineWeightLoader;
  readonly engineName: string;
  /** What the engine serves to requests that carry `loader.modelName()` (or its base model name): path and version. */
  served(): { path: string | undefined; version: number | null };
  /** How many loads the engine performed. */
  loads(): number;
  /** Whether the engine holds generation (paused or asleep). */
  paused(): boolean;
  /** For each requested mode, the mode this loader documents it applies against this engine. */
  readonly modes: Readonly<Record<InFlightOnSwitch, InFlightOnSwitch>>;
  /** Whether the engine reports a version (servedVersion is then checked to equal the loaded one). */
  readonly reportsVersion: boolean;
  /** The engine refuses the next load with `message`. */
  failNextLoad(message: string): void;
  /** The engine stops answering loads. */
  hangLoads(): void;
  close(): Promise<void>;
}

export interface HarnessOptions {
  timeoutMs: number;
  /** Point the loader at this url instead of the engine's (an unreachable one). */
  url?: string;
}

export type MakeWeightLoaderHarness = (opts: HarnessOptions) => Promise<WeightLoaderHarness>;

/** A url on 127.0.0.1 where nothing listens (a port just released). */
/**
 * A URL nothing answers at: a listener that drops every connection at once. It stays open (unref'd) for the rest of
 * the test process, so no other test's server can take its port between here and the call — a port merely freed
 * again could be, and then the "unreachable" engine answered (seen under CI load).
 */
async function closedUrl(): Promise<string> {
  const srv = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  srv.unref();
  const addr = srv.address();
  const port = typeof addr === "object" && addr ? addr.port : 1;
  return `http://127.0.0.1:${port}/v1`;
}

async function rejection(p: Promise<unknown>): Promise<ArborError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, "expected a rejection").toBeInstanceOf(ArborError);
  return e as ArborError;
}

/**
 * Register the contract suite for one loader kind (`name` is the loader's `kind`); `variant` tells apart two
 * configurations of one kind in the test names.
 */
export function describeWeightLoaderContract(name: string, makeHarness: MakeWeightLoaderHarness, variant?: string): void {
  describe(`EngineWeightLoader contract: ${name}${variant ? ` (${variant})` : ""}`, () => {
    const open: WeightLoaderHarness[] = [];
    const make = async (opts: HarnessOptions = { timeoutMs: 5_000 }): Promise<WeightLoaderHarness> => {
      const h = await makeHarness(opts);
      open.push(h);
      return h;
    };
    afterEach(async () => {
      for (const h of open.splice(0)) await h.close();
    });

    it("load makes the engine serve the new path (and version where it reports one)", async () => {
      const h = await make();
      await h.loader.load("/ckpt/v1", 1);
      expect(h.served().path).toBe("/ckpt/v1");
      await h.loader.load("/ckpt/v2", 2);
      expect(h.served().path).toBe("/ckpt/v2");
      expect(h.loads()).toBe(2);
      if (h.reportsVersion) {
        expect(h.served().version).toBe(2);
        expect(await h.loader.servedVersion()).toBe(2);
      } else {
        expect(await h.loader.servedVersion()).toBeNull();
      }
      expect(["gguf", "hf"]).toContain(h.loader.format);
      expect(h.loader.kind).toBe(name);
    });

    for (const requested of ["finish", "abort", "resume"] as const) {
      it(`prepare("${requested}") applies the documented mode and holds the engine only until load`, async () => {
        const h = await make();
        const mode = await h.loader.prepare(requested);
        expect(mode).toBe(h.modes[requested]);
        // Only "finish" (the caller drains) leaves generation running; abort and resume need the engine held.
        expect(h.paused()).toBe(mode !== "finish");
        await h.loader.load("/ckpt/v1", 1);
        expect(h.paused()).toBe(false);
        expect(h.served().path).toBe("/ckpt/v1");
      });
    }

    it("a refused load rejects with code weight_sync naming the engine and carrying its message; recover un-pauses", async () => {
      const h = await make();
      await h.loader.load("/ckpt/v1", 1);
      const mode = await h.loader.prepare("abort");
      h.failNextLoad("Failed to get weights iterator: no safetensors in /ckpt/v2");
      const e = await rejection(h.loader.load("/ckpt/v2", 2));
      expect(e.code).toBe("weight_sync");
      expect(e.message).toContain(h.engineName);
      expect(e.message).toContain("Failed to get weights iterator: no safetensors in /ckpt/v2");
      expect(h.served().path).toBe("/ckpt/v1");
      expect(h.paused()).toBe(mode !== "finish");
      await h.loader.recover?.();
      expect(h.paused()).toBe(false);
      // The engine is usable again: the next load goes through.
      await h.loader.load("/ckpt/v2", 2);
      expect(h.served().path).toBe("/ckpt/v2");
    });

    it("an unreachable engine fails with a clear error naming the url", async () => {
      const url = await closedUrl();
      const h = await make({ timeoutMs: 5_000, url });
      const e = await rejection(h.loader.load("/ckpt/v1", 1));
      expect(e.code).toBe("weight_sync");
      expect(e.message).toContain(h.engineName);
      expect(e.message).toContain(url);
      expect(e.message).toMatch(/unreachable/);
      await h.loader.recover?.(); // never throws
    });

    it("a hung engine is bounded by timeoutMs with a clear error", async () => {
      const h = await make({ timeoutMs: 300 });
      h.hangLoads();
      const e = await rejection(h.loader.load("/ckpt/v1", 1));
      expect(e.code).toBe("weight_sync");
      expect(e.message).toContain(h.engineName);
      expect(e.message).toMatch(/no answer .* within 300 ms/);
    });

    it("loading the same version twice loads it once", async () => {
      const h = await make();
      await h.loader.load("/ckpt/v1", 1);
      const mode = await h.loader.prepare("abort");
      await h.loader.load("/ckpt/v1", 1);
      expect(h.loads()).toBe(1);
      expect(h.served().path).toBe("/ckpt/v1");
      // The skipped load still ends the pause prepare began.
      expect(mode === "finish" || !h.paused()).toBe(true);
      expect(h.paused()).toBe(false);
    });
  });
}
