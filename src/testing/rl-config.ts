// Test fixture: the small real RL run the end-to-end CLI tests share — the shipped SFT policy on llama.cpp
// engines, calc tasks, GRPO with outcome + process reward — as a raw config for parseRunConfig.
import { join } from "node:path";

/** Raw config of a small RL run writing under `dir` (sandboxes and output per `name`); `over` replaces top-level keys. */
export function smallRlConfig(dir: string, name: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    seed: 1,
    model: { path: "models/calc-sft.gguf" },
    engines: [
      { name: "e0", sequences: 4, contextSize: 1024 },
      { name: "e1", sequences: 4, contextSize: 1024 },
    ],
    env: { name: "calc", tasks: 4, seed: 7 },
    rollout: { groupSize: 4, concurrency: 8 },
    agent: { maxTurns: 3, maxTokensPerCall: 32, maxTotalTokens: 96, temperature: 1 },
    train: { estimator: "grpo", lr: 3e-3 },
    // The process reward varies within groups even when no answer is right, so every batch has signal.
    reward: { outcome: 1, process: 1 },
    sandbox: { root: join(dir, `sandboxes-${name}`) },
    output: { dir: join(dir, name) },
    ...over,
  };
}
