// `arbor run` refuses engines in the prefill or decode role: its gateway sends whole calls, which
// those engines refuse (they are served by `arbor serve engine`, paired through a KV pool).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { runIteration } from "./run.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-run-roles-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("arbor run with engine roles", () => {
  it("refuses a prefill engine, naming the field, before starting any engine", async () => {
    const cfg = parseRunConfig({
      model: { path: join(import.meta.dirname, "../../models/calc-sft.gguf") },
      engines: [{ name: "e0" }, { name: "p0", role: "prefill", kvPool: { url: "redis://127.0.0.1:6379" } }],
      output: { dir },
    });
    expect(cfg.engines[0]?.role).toBe("mixed");
    await expect(runIteration(cfg, { progress: false, log: () => undefined })).rejects.toThrow(/engines\[1\]\.role: "prefill" engines are served by `arbor serve engine`/);
  });

  it("validates role and kvPool in the engine config, naming the field", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0", role: "both" }] })).toThrow(/engines\[0\]\.role: must be prefill, decode or mixed/);
    expect(() => parseRunConfig({ engines: [{ name: "e0", kvPool: { url: "http://x" } }] })).toThrow(/engines\[0\]\.kvPool\.url: must be a redis:\/\/ or rediss:\/\/ URL/);
    expect(parseRunConfig({ engines: [{ name: "e0", kvPool: { url: "redis://r:6379" } }] }).engines[0]?.kvPool).toEqual({ url: "redis://r:6379", capacityBytes: 1024 ** 3, name: "default" });
  });
});
