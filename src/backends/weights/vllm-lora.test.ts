// The vLLM LoRA loader beyond the shared contract: one adapter per version named arbor-v{N} (the model name requests
// must carry), the previous adapter unloaded, the hint when runtime LoRA updating is off, the path map and the key.
import { afterEach, describe, expect, it } from "vitest";
import { startFakeVllmAdmin, type FakeVllmAdmin } from "../../testing/fake-vllm-admin.js";
import { createVllmLoraLoader, loraAdapterName } from "./vllm-lora.js";

const engines: FakeVllmAdmin[] = [];
async function engine(opts: Parameters<typeof startFakeVllmAdmin>[0] = {}): Promise<FakeVllmAdmin> {
  const e = await startFakeVllmAdmin(opts);
  engines.push(e);
  return e;
}
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});

describe("createVllmLoraLoader", () => {
  it("loads arbor-v{N}, reports it as the model name and unloads the previous adapter", async () => {
    const e = await engine();
    const l = createVllmLoraLoader({ name: "v", url: e.url });
    expect(l.modelName?.()).toBeUndefined();
    await l.load("/ckpt/lora-3", 3);
    expect(l.modelName?.()).toBe("arbor-v3");
    await l.load("/ckpt/lora-4", 4);
    expect(l.modelName?.()).toBe(loraAdapterName(4));
    expect([...e.adapters]).toEqual([["arbor-v4", "/ckpt/lora-4"]]);
    expect(e.adapterLoads).toEqual([
      { lora_name: "arbor-v3", lora_path: "/ckpt/lora-3" },
      { lora_name: "arbor-v4", lora_path: "/ckpt/lora-4" },
    ]);
    expect(e.log.filter((r) => r.startsWith("POST"))).toEqual(["POST /v1/load_lora_adapter", "POST /v1/load_lora_adapter", "POST /v1/unload_lora_adapter"]);
  });

  it("a refused adapter keeps the previous model name", async () => {
    const e = await engine();
    const l = createVllmLoraLoader({ name: "v", url: e.url });
    await l.load("/ckpt/lora-1", 1);
    e.failNextLoad("Loading lora arbor-v2 failed: No adapter found for /ckpt/lora-2");
    await expect(l.load("/ckpt/lora-2", 2)).rejects.toMatchObject({ code: "weight_sync", message: expect.stringContaining("No adapter found for /ckpt/lora-2") });
    expect(l.modelName?.()).toBe("arbor-v1");
  });

  it("names VLLM_ALLOW_RUNTIME_LORA_UPDATING when the server has no LoRA routes", async () => {
    const e = await engine({ loraUpdating: false });
    const err = await createVllmLoraLoader({ name: "v-nolora", url: e.url }).load("/ckpt/lora-1", 1).catch((x: unknown) => x);
    expect((err as Error).message).toMatch(/v-nolora.*HTTP 404.*VLLM_ALLOW_RUNTIME_LORA_UPDATING=True/);
  });

  it("rewrites the adapter path with pathMap and sends the API key to the /v1 routes", async () => {
    const e = await engine({ apiKey: "secret" });
    const l = createVllmLoraLoader({ name: "v", url: e.url, apiKey: "secret", pathMap: { from: "/arbor/ckpt", to: "/adapters" } });
    await l.load("/arbor/ckpt/it2", 2);
    expect(e.adapters.get("arbor-v2")).toBe("/adapters/it2");
    const noKey = createVllmLoraLoader({ name: "v", url: e.url });
    await expect(noKey.load("/x", 9)).rejects.toMatchObject({ message: expect.stringContaining("HTTP 401") });
  });

  it("the fake answers a second load of one name as vLLM does (HTTP 400, already loaded)", async () => {
    const e = await engine();
    const root = e.url.replace(/\/v1$/, "");
    const post = () => fetch(`${root}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ lora_name: "a", lora_path: "/p" }) });
    expect(await (await post()).text()).toBe("Success: LoRA adapter 'a' added successfully.");
    const again = await post();
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({ error: { message: "The lora adapter 'a' has already been loaded.", type: "InvalidUserInput", param: null, code: 400 } });
  });
});
