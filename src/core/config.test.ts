import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadRunConfig, parseRunConfig } from "./config.js";
import { ArborError } from "./errors.js";

function writeTmp(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "arbor-cfg-"));
  const p = join(dir, "c.yaml");
  writeFileSync(p, text);
  return p;
}

describe("run config", () => {
  it("fills defaults for a minimal config", () => {
    const cfg = parseRunConfig({ engines: [{ name: "e0" }] });
    expect(cfg.rollout.groupSize).toBe(4);
    expect(cfg.engines[0]?.sequences).toBe(4);
    expect(cfg.model.init.nEmbd).toBe(64);
  });

  it("names the field path and reason of an invalid value", () => {
    const p = writeTmp("engines: [{name: e0}]\nrollout:\n  groupSize: 0\n");
    expect(() => loadRunConfig(p)).toThrowError(/rollout\.groupSize: .*>=\s*1/);
  });

  it("rejects an unknown backend type naming the field", () => {
    try {
      parseRunConfig({ backends: [{ name: "b", type: "nosuch", url: "http://127.0.0.1:1/v1" }] });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ArborError);
      expect((e as Error).message).toMatch(/backends\[0\]\.type: /);
      expect((e as Error).message).toContain("builtin");
    }
  });

  it("rejects unknown keys", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0" }], rollot: {} })).toThrowError(/rollot/);
  });

  it("rejects a backend with neither url nor in-process engine", () => {
    expect(() => parseRunConfig({ backends: [{ name: "x", type: "builtin" }] })).toThrowError(
      /backends\[0\]\.url: backend 'x' has no url/,
    );
  });

  it("reports YAML syntax errors and missing files in one line", () => {
    expect(() => loadRunConfig(writeTmp("engines: [\n"))).toThrowError(/YAML syntax/);
    expect(() => loadRunConfig("/nonexistent/x.yaml")).toThrowError(/no such file/);
  });
});
