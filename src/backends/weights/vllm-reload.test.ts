// The vLLM reload loader beyond the shared contract: the exact route sequence with and without sleep, the bodies of
// its collective RPCs, the fallback to "finish" and the dev-mode hint on a server without development routes, the
// path map, and recover after a failed reload while asleep.
import { afterEach, describe, expect, it } from "vitest";
import { startFakeVllmAdmin, type FakeVllmAdmin } from "../../testing/fake-vllm-admin.js";
import { createVllmReloadLoader } from "./vllm-reload.js";

const engines: FakeVllmAdmin[] = [];
async function engine(opts: Parameters<typeof startFakeVllmAdmin>[0] = {}): Promise<FakeVllmAdmin> {
  const e = await startFakeVllmAdmin(opts);
  engines.push(e);
  return e;
}
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});

describe("createVllmReloadLoader", () => {
  it("pauses (keep for resume), points the model config at the directory, reloads, resets the prefix cache, resumes", async () => {
    const e = await engine();
    const l = createVllmReloadLoader({ name: "v", url: e.url });
    expect(await l.prepare("resume")).toBe("resume");
    expect(e.paused).toBe("keep");
    await l.load("/ckpt/it1", 1);
    expect(e.log).toEqual(["POST /pause?mode=keep", "POST /collective_rpc", "POST /collective_rpc", "POST /reset_prefix_cache", "POST /resume"]);
    expect(e.reloads).toEqual(["/ckpt/it1"]);
    expect(e.prefixCacheResets).toBe(1);
    expect(e.paused).toBe(false);
  });

  it("with sleepLevel sleeps, wakes the weights before reloading and the KV cache after; resume falls back to abort", async () => {
    const e = await engine();
    const l = createVllmReloadLoader({ name: "v", url: e.url, sleepLevel: 1 });
    expect(await l.prepare("resume")).toBe("abort");
    await l.load("/ckpt/it1", 1);
    expect(e.log).toEqual([
      "POST /pause?mode=abort",
      "POST /sleep?level=1",
      "POST /wake_up?tags=weights",
      "POST /collective_rpc",
      "POST /collective_rpc",
      "POST /wake_up?tags=kv_cache",
      "POST /reset_prefix_cache",
      "POST /resume",
    ]);
    expect(e.asleep.size).toBe(0);
  });

  it("recover after a failed reload while asleep wakes every tag and resumes", async () => {
    const e = await engine();
    const l = createVllmReloadLoader({ name: "v", url: e.url, sleepLevel: 2 });
    await l.prepare("abort");
    e.failNextLoad("CUDA out of memory");
    await expect(l.load("/ckpt/it1", 1)).rejects.toMatchObject({ code: "weight_sync", message: expect.stringContaining("CUDA out of memory") });
    expect(e.asleep.size).toBeGreaterThan(0);
    await l.recover?.();
    expect(e.asleep.size).toBe(0);
    expect(e.paused).toBe(false);
    expect(e.log.slice(-2)).toEqual(["POST /wake_up", "POST /resume"]);
  });

  it("without development routes: prepare falls back to finish and a load names VLLM_SERVER_DEV_MODE", async () => {
    const e = await engine({ devMode: false });
    const l = createVllmReloadLoader({ name: "v-prod", url: e.url });
    expect(await l.prepare("abort")).toBe("finish");
    const err = await l.load("/ckpt/it1", 1).catch((x: unknown) => x);
    expect(err).toMatchObject({ code: "weight_sync" });
    expect((err as Error).message).toMatch(/v-prod.*HTTP 404.*VLLM_SERVER_DEV_MODE=1/);
  });

  it("rewrites the path with pathMap", async () => {
    const e = await engine();
    const l = createVllmReloadLoader({ name: "v", url: e.url, pathMap: { from: "/runs/a/ckpt/", to: "/data/ckpt" } });
    await l.load("/runs/a/ckpt/it5", 5);
    expect(e.servedPath).toBe("/data/ckpt/it5");
  });

  it("the fake answers collective_rpc as vLLM does: 400 without a method, 500 for an unknown one", async () => {
    const e = await engine();
    const root = e.url.replace(/\/v1$/, "");
    const post = (body: object) => fetch(`${root}/collective_rpc`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const missing = await post({ args: [] });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ error: { message: "Missing 'method' in request body", code: 400 } });
    expect((await post({ method: "no_such_method" })).status).toBe(500);
    const ok = await post({ method: "reload_weights" });
    expect(await ok.json()).toEqual({ results: [null] });
  });
});
