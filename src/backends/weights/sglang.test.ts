// The SGLang weight loader beyond the shared contract: the exact request bodies, the pause modes it picks, the
// version read from servers without /get_weight_version, the path map, the API key, and the one retry after a
// lost answer that never loads twice.
import { afterEach, describe, expect, it } from "vitest";
import { startFakeSglangAdmin, type FakeSglangAdmin } from "../../testing/fake-sglang-admin.js";
import { createSglangWeightLoader } from "./sglang.js";

const engines: FakeSglangAdmin[] = [];
async function engine(opts: Parameters<typeof startFakeSglangAdmin>[0] = {}): Promise<FakeSglangAdmin> {
  const e = await startFakeSglangAdmin(opts);
  engines.push(e);
  return e;
}
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});

describe("createSglangWeightLoader", () => {
  it("posts model_path, abort_all_requests false and the version as weight_version; load_format only when set", async () => {
    const e = await engine();
    await createSglangWeightLoader({ name: "s", url: e.url }).load("/ckpt/it3", 3);
    await createSglangWeightLoader({ name: "s", url: e.url, loadFormat: "safetensors" }).load("/ckpt/it4", 4);
    expect(e.loads).toEqual([
      { model_path: "/ckpt/it3", load_format: null, abort_all_requests: false, weight_version: "3" },
      { model_path: "/ckpt/it4", load_format: "safetensors", abort_all_requests: false, weight_version: "4" },
    ]);
    expect(e.weightVersion).toBe("4");
  });

  it("pauses with mode abort for abort and retract for resume, sends nothing for finish, and continues after the load", async () => {
    const e = await engine();
    const l = createSglangWeightLoader({ name: "s", url: e.url });
    expect(await l.prepare("finish")).toBe("finish");
    expect(e.log.filter((r) => r.includes("pause_generation"))).toEqual([]);
    expect(await l.prepare("resume")).toBe("resume");
    expect(e.paused).toBe("retract");
    await l.load("/ckpt/v1", 1);
    expect(e.paused).toBe(false);
    expect(await l.prepare("abort")).toBe("abort");
    expect(e.paused).toBe("abort");
    await l.load("/ckpt/v2", 2);
    expect(e.log.filter((r) => !r.startsWith("GET"))).toEqual([
      "POST /pause_generation",
      "POST /update_weights_from_disk",
      "POST /continue_generation",
      "POST /pause_generation",
      "POST /update_weights_from_disk",
      "POST /continue_generation",
    ]);
  });

  it("falls back to finish on a server without /pause_generation", async () => {
    const e = await engine({ pauseRoutes: false });
    const l = createSglangWeightLoader({ name: "s", url: e.url });
    expect(await l.prepare("abort")).toBe("finish");
    await l.load("/ckpt/v1", 1);
    expect(e.log.filter((r) => r.startsWith("POST"))).toEqual(["POST /pause_generation", "POST /update_weights_from_disk"]);
  });

  it("reads the version from /get_model_info on a server without /get_weight_version; a non-integer version is null", async () => {
    const e = await engine({ weightVersionRoute: false });
    const l = createSglangWeightLoader({ name: "s", url: e.url });
    expect(await l.servedVersion()).toBeNull(); // "default"
    await l.load("/ckpt/v7", 7);
    expect(await l.servedVersion()).toBe(7);
    expect(e.log).toContain("GET /get_model_info");
  });

  it("rewrites the path with pathMap and refuses a checkpoint outside it, naming the engine", async () => {
    const e = await engine();
    const l = createSglangWeightLoader({ name: "s-remote", url: e.url, pathMap: { from: "/home/arbor/run/ckpt", to: "/mnt/ckpt" } });
    await l.load("/home/arbor/run/ckpt/it2", 2);
    expect(e.modelPath).toBe("/mnt/ckpt/it2");
    await expect(l.load("/tmp/elsewhere/it3", 3)).rejects.toMatchObject({ code: "weight_sync", message: expect.stringContaining("s-remote") });
    expect(e.loads).toHaveLength(1);
  });

  it("sends the API key as a bearer token", async () => {
    const e = await engine({ apiKey: "k1" });
    await expect(createSglangWeightLoader({ name: "s", url: e.url }).load("/ckpt/v1", 1)).rejects.toMatchObject({ message: expect.stringContaining("HTTP 401") });
    await createSglangWeightLoader({ name: "s", url: e.url, apiKey: "k1" }).load("/ckpt/v1", 1);
    expect(e.modelPath).toBe("/ckpt/v1");
  });

  it("after a lost answer asks the version first: a load that arrived is not sent again, one that did not is resent once", async () => {
    const e = await engine();
    const l = createSglangWeightLoader({ name: "s", url: e.url });
    e.dropNextLoad("after");
    await l.load("/ckpt/v1", 1);
    expect(e.loads.map((x) => x.model_path)).toEqual(["/ckpt/v1"]);
    e.dropNextLoad("before");
    await l.load("/ckpt/v2", 2);
    expect(e.loads.map((x) => x.model_path)).toEqual(["/ckpt/v1", "/ckpt/v2"]);
    // v1 once (its lost answer confirmed by the version), v2 twice (the first never arrived).
    expect(e.log.filter((r) => r === "POST /update_weights_from_disk")).toHaveLength(3);
  });

  it("the fake refuses a body without model_path as SGLang does (HTTP 400, its error object)", async () => {
    const e = await engine();
    const res = await fetch(e.url.replace(/\/v1$/, "") + "/update_weights_from_disk", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ weight_version: 3 }) });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ object: "error", code: 400, message: expect.stringContaining("model_path") });
  });
});
