import { describe, expect, it } from "vitest";
import { loadRunConfig } from "./config.js";
import { applyOverrides, parseOverride } from "./config-overrides.js";

const QUICKSTART = "examples/quickstart.yaml";
const set = (...args: string[]) => args.map(parseOverride);

describe("parseOverride", () => {
  it("splits at the first '=' and parses the value as YAML", () => {
    expect(parseOverride("train.lr=1e-4")).toEqual({ path: ["train", "lr"], value: 1e-4 });
    expect(parseOverride("name=a=b")).toEqual({ path: ["name"], value: "a=b" });
    expect(parseOverride("gateway.auth=")).toEqual({ path: ["gateway", "auth"], value: null });
    expect(parseOverride("x.on=true").value).toBe(true);
    expect(parseOverride("x.list=[1, two]").value).toEqual([1, "two"]);
    expect(parseOverride("x.map={a: 1}").value).toEqual({ a: 1 });
  });

  it("refuses a missing '=', an empty path segment and a value that is not YAML, naming the argument", () => {
    expect(() => parseOverride("train.lr")).toThrowError("--set train.lr: expected key=value (e.g. train.lr=1e-4)");
    expect(() => parseOverride("train..lr=1")).toThrowError("--set train..lr=1: 'train..lr' is not a dotted path (e.g. train.lr)");
    expect(() => parseOverride("=1")).toThrowError(/is not a dotted path/);
    expect(() => parseOverride("x=[1, 2")).toThrowError(/^--set x=\[1, 2: the value is not YAML: /);
  });
});

describe("applyOverrides", () => {
  it("sets values on a copy, creating mappings on the way, indexing lists by number", () => {
    const raw = { train: { lr: 1 }, engines: [{ name: "a" }, { name: "b" }] };
    const out = applyOverrides(raw, set("train.lr=2", "env.tasks=3", "engines.1.sequences=8"), "config c.yaml");
    expect(out).toEqual({ train: { lr: 2 }, env: { tasks: 3 }, engines: [{ name: "a" }, { name: "b", sequences: 8 }] });
    expect(raw).toEqual({ train: { lr: 1 }, engines: [{ name: "a" }, { name: "b" }] });
  });

  it("an empty file is an empty mapping; no overrides leave the value as it is", () => {
    expect(applyOverrides(null, set("seed=3"), "config c.yaml")).toEqual({ seed: 3 });
    const raw = { a: 1 };
    expect(applyOverrides(raw, [], "config c.yaml")).toBe(raw);
  });

  it("refuses a path through a scalar, a bad list index and a root that is not a mapping, as the loader words it", () => {
    expect(() => applyOverrides({ seed: 1 }, set("seed.x=2"), "config c.yaml")).toThrowError("invalid config c.yaml: seed: is 1, not a mapping, so --set cannot go inside it");
    expect(() => applyOverrides({ engines: [{}] }, set("engines.3.sequences=2"), "config c.yaml")).toThrowError("invalid config c.yaml: engines.3: engines is a list of 1; index it with 0..0");
    expect(() => applyOverrides({ engines: [{}] }, set("engines.first=2"), "config c.yaml")).toThrowError(/engines\.first: engines is a list of 1/);
    expect(() => applyOverrides([1], set("a=1"), "config c.yaml")).toThrowError("invalid config c.yaml: (root): must be a mapping to apply --set");
  });
});

describe("loadRunConfig with overrides", () => {
  it("validates the file with the overrides applied", () => {
    const base = loadRunConfig(QUICKSTART);
    const cfg = loadRunConfig(QUICKSTART, set("train.lr=1e-4", "engines.1.sequences=2", "output.dir=.arbor/runs/other"));
    expect(cfg.train?.lr).toBe(1e-4);
    expect(cfg.engines[1]?.sequences).toBe(2);
    expect(cfg.output.dir).toBe(".arbor/runs/other");
    expect({ ...cfg, train: base.train, engines: base.engines, output: base.output }).toEqual(base);
  });

  it("gives the file's errors: an unknown key and a wrong type name their paths", () => {
    expect(() => loadRunConfig(QUICKSTART, set("train.learningRate=0.1"))).toThrowError(/^invalid config examples\/quickstart\.yaml: train: .*learningRate/);
    expect(() => loadRunConfig(QUICKSTART, set("rollout.groupSize=eight"))).toThrowError(/^invalid config examples\/quickstart\.yaml: rollout\.groupSize: /);
  });
});
