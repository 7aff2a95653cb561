// The run's weight sync over external engines: each gets the checkpoint in its own format (converted once), an
// engine that fails leaves the rotation with its reason logged, and the load fails only when none is left.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TokenBackend } from "../backends/backend.js";
import type { EngineWeightLoader, WeightsFormat } from "../backends/weights/engine-weights.js";
import { SyncedBackend } from "../backends/weights/synced-backend.js";
import { realClock } from "../core/real-clock.js";
import { checkpointFormat } from "../model/hf/checkpoint-formats.js";
import { ensurePolicy } from "../model/policy.js";
import { fleetWeightSync } from "./fleet-weight-sync.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-fleet-sync-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const policy = ensurePolicy(dir, { seed: 5, nEmbd: 32, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 128 });

/** An external engine whose loader records the paths it was given, and fails when told to. */
function engine(name: string, format: WeightsFormat, fail?: string) {
  const paths: string[] = [];
  const loader: EngineWeightLoader = {
    kind: "scripted",
    format,
    prepare: async (m) => m,
    load: async (path) => {
      if (fail) throw new Error(fail);
      paths.push(path);
    },
    servedVersion: async () => null,
  };
  const backend = { name, url: `http://${name}/v1` } as TokenBackend;
  return { paths, synced: new SyncedBackend({ makeBackend: () => backend, loader, inFlight: "finish", clock: realClock }) };
}

describe("fleetWeightSync", () => {
  it("gives each engine the checkpoint in the format it loads, converting once", async () => {
    const sg = engine("sglang-0", "hf");
    const vl = engine("vllm-0", "hf");
    const ls = engine("llama-0", "gguf");
    const sync = fleetWeightSync({ engines: [], inFlight: "finish", external: [sg.synced, vl.synced, ls.synced] });
    await sync.load(policy.path, 1);
    expect(sg.paths).toEqual([`${policy.path}.hf`]);
    expect(vl.paths).toEqual(sg.paths);
    expect(checkpointFormat(sg.paths[0]!)).toBe("hf");
    expect(ls.paths).toEqual([policy.path]);
    expect([sg, vl, ls].map((e) => e.synced.version)).toEqual([1, 1, 1]);
  });

  it("takes an engine that fails out of rotation, logs why, and goes on with the others", async () => {
    const ok = engine("ok", "gguf");
    const bad = engine("bad", "gguf", "engine said: out of memory");
    const lines: string[] = [];
    const sync = fleetWeightSync({ engines: [], inFlight: "finish", external: [ok.synced, bad.synced], log: (l) => lines.push(l) });
    await sync.load(policy.path, 1);
    expect(lines).toEqual([expect.stringMatching(/^weights {2}out of rotation: bad: weight sync: backend bad failed to load version 1: engine said: out of memory$/)]);
    expect(bad.synced.retired).toMatch(/out of memory/);
    // The next version skips it: only the engine left is asked.
    await sync.load(policy.path, 2);
    expect(ok.paths).toEqual([policy.path, policy.path]);
    expect(ok.synced.version).toBe(2);
  });

  it("fails naming every engine and its reason when none serves the new version", async () => {
    const a = engine("a", "gguf", "disk full");
    const b = engine("b", "hf", "bad checkpoint");
    const sync = fleetWeightSync({ engines: [], inFlight: "finish", external: [a.synced, b.synced] });
    await expect(sync.load(policy.path, 1)).rejects.toThrow(/weight sync: no engine serves policy version 1 \(a: .*disk full; b: .*bad checkpoint\)/);
    // Later loads say the same, from the reasons recorded.
    await expect(sync.load(policy.path, 2)).rejects.toThrow(/no engine serves policy version 2 \(a: .*disk full; b: .*bad checkpoint\)/);
  });
});
