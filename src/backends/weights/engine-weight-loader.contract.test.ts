// Runs the EngineWeightLoader contract for the SGLang, vLLM reload and vLLM LoRA loaders against fakes built from
// the engines' sources (src/testing/fake-sglang-admin.ts, fake-vllm-admin.ts).
import { startFakeSglangAdmin } from "../../testing/fake-sglang-admin.js";
import { startFakeVllmAdmin } from "../../testing/fake-vllm-admin.js";
import { describeWeightLoaderContract } from "./engine-weight-loader.contract.js";
import { createSglangWeightLoader } from "./sglang.js";
import { createVllmLoraLoader } from "./vllm-lora.js";
import { createVllmReloadLoader } from "./vllm-reload.js";

describeWeightLoaderContract("sglang", async ({ timeoutMs, url }) => {
  const engine = await startFakeSglangAdmin();
  const loader = createSglangWeightLoader({ name: "sgl-0", url: url ?? engine.url, timeoutMs });
  return {
    loader,
    engineName: "sgl-0",
    served: () => ({ path: engine.modelPath, version: engine.weightVersion === null || Number.isNaN(Number(engine.weightVersion)) ? null : Number(engine.weightVersion) }),
    loads: () => engine.loads.length,
    paused: () => engine.paused !== false,
    modes: { finish: "finish", abort: "abort", resume: "resume" },
    reportsVersion: true,
    failNextLoad: (m) => engine.failNextLoad(m),
    hangLoads: () => engine.hangLoads(),
    close: () => engine.close(),
  };
});

describeWeightLoaderContract("vllm-reload", async ({ timeoutMs, url }) => {
  const engine = await startFakeVllmAdmin();
  const loader = createVllmReloadLoader({ name: "vllm-0", url: url ?? engine.url, timeoutMs });
  return {
    loader,
    engineName: "vllm-0",
    served: () => ({ path: engine.servedPath, version: null }),
    loads: () => engine.reloads.length,
    paused: () => engine.paused !== false || engine.asleep.size > 0,
    modes: { finish: "finish", abort: "abort", resume: "resume" },
    reportsVersion: false,
    failNextLoad: (m) => engine.failNextLoad(m),
    hangLoads: () => engine.hangLoads(),
    close: () => engine.close(),
  };
});

describeWeightLoaderContract("vllm-reload", async ({ timeoutMs, url }) => {
  // The same contract with sleep level 1 around each reload: "resume" falls back to "abort".
  const engine = await startFakeVllmAdmin();
  const loader = createVllmReloadLoader({ name: "vllm-sleep", url: url ?? engine.url, timeoutMs, sleepLevel: 1 });
  return {
    loader,
    engineName: "vllm-sleep",
    served: () => ({ path: engine.servedPath, version: null }),
    loads: () => engine.reloads.length,
    paused: () => engine.paused !== false || engine.asleep.size > 0,
    modes: { finish: "finish", abort: "abort", resume: "abort" },
    reportsVersion: false,
    failNextLoad: (m) => engine.failNextLoad(m),
    hangLoads: () => engine.hangLoads(),
    close: () => engine.close(),
  };
}, "sleep level 1");

describeWeightLoaderContract("vllm-lora", async ({ timeoutMs, url }) => {
  const engine = await startFakeVllmAdmin({ model: "base" });
  const loader = createVllmLoraLoader({ name: "vllm-lora-0", url: url ?? engine.url, timeoutMs });
  return {
    loader,
    engineName: "vllm-lora-0",
    served: () => {
      const m = loader.modelName?.();
      return { path: m === undefined ? engine.servedPath : engine.adapters.get(m), version: null };
    },
    loads: () => engine.adapterLoads.length,
    paused: () => engine.paused !== false,
    modes: { finish: "finish", abort: "abort", resume: "finish" },
    reportsVersion: false,
    failNextLoad: (m) => engine.failNextLoad(m),
    hangLoads: () => engine.hangLoads(),
    close: () => engine.close(),
  };
});
