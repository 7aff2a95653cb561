import { describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { headDim, tinyConfig } from "./config.js";
import { Vocab } from "./vocab.js";

describe("tinyConfig", () => {
  it("fills defaults and the vocabulary size", () => {
    const cfg = tinyConfig();
    expect(cfg).toEqual({
      nVocab: new Vocab().size,
      nEmbd: 64,
      nLayer: 2,
      nHead: 4,
      nHeadKv: 4,
      nFf: 192,
      contextLength: 2048,
      rmsEps: 1e-5,
      ropeFreqBase: 10000,
    });
    expect(headDim(cfg)).toBe(16);
  });

  it("applies overrides and ignores undefined ones", () => {
    const cfg = tinyConfig({ nEmbd: 32, nHead: 2, nHeadKv: 1, nLayer: undefined });
    expect([cfg.nEmbd, cfg.nHead, cfg.nHeadKv, cfg.nLayer]).toEqual([32, 2, 1, 2]);
  });

  it.each([
    [{ nEmbd: 63 }, /nEmbd \(63\) must be divisible by nHead \(4\)/],
    [{ nHeadKv: 3 }, /nHead \(4\) must be divisible by nHeadKv \(3\)/],
    [{ nEmbd: 12, nHead: 4 }, /must be even/],
    [{ nLayer: 0 }, /nLayer must be a positive integer/],
    [{ nFf: 1.5 }, /nFf must be a positive integer/],
    [{ rmsEps: 0 }, /rmsEps must be a positive number/],
    [{ ropeFreqBase: Number.NaN }, /ropeFreqBase must be a positive number/],
  ])("rejects %j", (overrides, message) => {
    expect(() => tinyConfig(overrides)).toThrow(ArborError);
    expect(() => tinyConfig(overrides)).toThrow(message);
  });
});
